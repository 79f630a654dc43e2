"""Claude Code hooks: the settings parser, the mapping table, matchers, input and answer
translation, and loading as sources (no Docker)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudrunner import pinning
from cloudrunner.protocol.claude_config import compile_claude_matcher, parse_claude_settings
from cloudrunner.protocol.claude_io import (
    classify_claude,
    claude_input,
    claude_match,
    translate_answer,
)
from cloudrunner.protocol.claude_mapping import CLAUDE_EVENTS, ClaudeOrigin, claude_tool_name
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.plan import build_plan
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.protocol.results import Execution, ExecutionStatus
from cloudrunner.sources import SourceSettings, SourceStatus, forget_loaded_sources, load_sources


def _parse(document: Any) -> Any:
    data = document if isinstance(document, bytes) else json.dumps(document, indent=1).encode()
    return parse_claude_settings(data, file=".claude/settings.json")


def _group(event: str, *hooks: dict[str, Any], matcher: str | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"hooks": list(hooks)}
    if matcher is not None:
        group["matcher"] = matcher
    return {"hooks": {event: [group]}}


CMD = {"type": "command", "command": "echo hi"}


# ---------------------------------------------------------------------------- parsing


def test_the_nested_form_maps_onto_cursor_events() -> None:
    result = _parse(
        {"permissions": {}, "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [CMD, {**CMD, "timeout": 3}]}],
            "UserPromptSubmit": [{"hooks": [CMD]}],
            "Stop": [{"hooks": [CMD]}],
        }}
    )  # fmt: skip
    assert result.errors == ()
    assert result.config is not None
    hooks = result.config.hooks
    assert set(hooks) == {"preToolUse", "beforeSubmitPrompt", "stop"}
    first, second = hooks["preToolUse"]
    assert (first.index, second.index) == (0, 1)
    assert second.definition.timeout == 3
    assert second.pointer == "/hooks/PreToolUse/0/hooks/1"
    assert first.claude is not None and first.claude.event == "PreToolUse"


def test_the_exec_form_runs_without_a_shell() -> None:
    args = ["$CLAUDE_PROJECT_DIR/x.js", "a b", "$(reboot)"]
    result = _parse(_group("Stop", {"type": "command", "command": "node", "args": args}))
    assert result.config is not None
    entry = result.config.hooks["stop"][0]
    assert entry.claude is not None
    assert entry.claude.argv == ("node", "$CLAUDE_PROJECT_DIR/x.js", "a b", "$(reboot)")
    assert entry.definition.command == ("exec node \"$CLAUDE_PROJECT_DIR\"/x.js 'a b' '$(reboot)'")


@pytest.mark.parametrize(
    ("hook", "code"),
    [
        ({"type": "prompt", "prompt": "x"}, "hook-skipped"),
        ({"type": "agent", "prompt": "x"}, "hook-skipped"),
        ({"type": "http", "url": "https://example.invalid"}, "hook-skipped"),
        ({**CMD, "async": True}, "hook-skipped"),
        ({**CMD, "shell": "powershell"}, "hook-skipped"),
        ({**CMD, "statusMessage": "Checking"}, "ignored-key"),
    ],
)
def test_hooks_that_cannot_run_are_reported(hook: dict[str, Any], code: str) -> None:
    result = _parse(_group("Stop", hook))
    assert code in [d.code for d in result.diagnostics]
    assert result.config is not None
    if code == "hook-skipped":
        assert "stop" not in result.config.hooks


def test_events_without_a_cursor_equivalent_are_reported() -> None:
    result = _parse({"hooks": {"Notification": [{"hooks": [CMD]}]}})
    assert result.config is not None and result.config.hooks == {}
    (note,) = [d for d in result.diagnostics if d.code == "hook-skipped"]
    assert "notification" in note.message and note.line is not None


@pytest.mark.parametrize(
    ("document", "pointer"),
    [
        ({"hooks": []}, "/hooks"),
        ({"hooks": {"Stop": {"hooks": [CMD]}}}, "/hooks/Stop"),
        ({"hooks": {"Stop": [{"hooks": CMD}]}}, "/hooks/Stop/0/hooks"),
        (_group("Stop", {"command": "x"}), "/hooks/Stop/0/hooks/0"),
        (_group("Stop", {**CMD, "timeout": "5"}), "/hooks/Stop/0/hooks/0/timeout"),
        (_group("Stop", {**CMD, "timeout": 0}), "/hooks/Stop/0/hooks/0/timeout"),
        (_group("Stop", {**CMD, "args": "x"}), "/hooks/Stop/0/hooks/0/args"),
        (_group("Stop", {**CMD, "command": ""}), "/hooks/Stop/0/hooks/0/command"),
        ({"hooks": {"Stop": [{"matcher": 3, "hooks": [CMD]}]}}, "/hooks/Stop/0/matcher"),
    ],
)  # fmt: skip
def test_wrong_types_disable_the_file_with_file_pointer_and_line(
    document: dict[str, Any], pointer: str
) -> None:
    result = _parse(document)
    assert result.config is None
    (problem,) = result.errors
    assert problem.pointer == pointer
    assert problem.file == ".claude/settings.json" and problem.line is not None


def test_invalid_json_and_non_objects_are_errors() -> None:
    assert _parse(b'{"hooks": {,}}').errors[0].code == "json-syntax"
    assert _parse([1]).errors[0].code == "not-an-object"
    assert _parse(b"\xff").errors[0].code == "not-utf8"


def test_disable_all_hooks_loads_none() -> None:
    result = _parse({"disableAllHooks": True, **_group("Stop", CMD)})
    assert result.config is not None and result.config.hooks == {}
    assert "hooks-disabled" in [d.code for d in result.diagnostics]


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["hooks", "matcher", "type", "command", "args", "timeout", "Stop",
                         "PreToolUse", "async", "x"]), inner, max_size=4),
    max_leaves=20,
))  # fmt: skip
@settings(max_examples=300, deadline=None)
def test_the_parser_never_raises(document: Any) -> None:
    result = _parse(document)
    if result.config is None:
        assert result.errors


# ---------------------------------------------------------------------------- mapping


def test_every_mapped_event_exists_in_cursor() -> None:
    for event in CLAUDE_EVENTS.values():
        assert event.cursor is None or event.cursor in EVENTS
        assert event.cursor is not None or event.unmapped_reason


@pytest.mark.parametrize(
    ("cursor", "tool_input", "claude"),
    [
        ("Shell", {"command": "ls"}, "Bash"),
        ("Write", {"file_path": "a", "content": "x"}, "Write"),
        ("Write", {"file_path": "a", "old_string": "x", "new_string": "y"}, "Edit"),
        ("Write", '{"old_string": "x"}', "Edit"),
        ("MCP:github__create_issue", None, "mcp__github__create_issue"),
        ("Read", None, "Read"),
        ("Unknown", None, "Unknown"),
    ],
)
def test_tool_names(cursor: str, tool_input: Any, claude: str) -> None:
    assert claude_tool_name(cursor, tool_input) == claude


@pytest.mark.parametrize(
    ("matcher", "tool", "matched"),
    [
        ("Bash", "Shell", True),
        ("Shell", "Shell", True),  # Cursor's spelling is tried too
        ("Bas", "Shell", False),  # exact names are exact
        ("Edit|Write", "Write", True),
        ("Notebook.*", "Write", False),
        ("mcp__.*", "MCP:x", True),
        ("*", "Read", True),
        ("", "Read", True),
        (None, "Read", True),
        ("^Re", "Read", True),
    ],
)
def test_claude_matchers(matcher: str | None, tool: str, matched: bool) -> None:
    result = _parse(_group("PreToolUse", CMD, matcher=matcher))
    assert result.config is not None
    entry = result.config.hooks["preToolUse"][0]
    spec = EVENTS["preToolUse"]
    payload = spec.input_model.model_validate({"tool_name": tool, "tool_input": {}})
    assert claude_match(entry, spec, payload, timeout_s=0.05).matched is matched


def test_an_invalid_matcher_never_runs() -> None:
    assert compile_claude_matcher("(").error is not None
    result = _parse(_group("PreToolUse", CMD, matcher="("))
    assert "invalid-matcher" in [d.code for d in result.errors]


# ---------------------------------------------------------------------------- input


def test_the_input_is_claudes_shape() -> None:
    spec = EVENTS["preToolUse"]
    payload = spec.input_model.model_validate(
        {"conversation_id": "c", "tool_name": "Shell", "tool_input": {"command": "ls"},
         "tool_use_id": "t", "transcript_path": "/t.jsonl"}
    )  # fmt: skip
    got = claude_input("PreToolUse", payload, "/ws")
    assert got == {
        "session_id": "c", "transcript_path": "/t.jsonl", "cwd": "/ws",
        "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"},
        "tool_use_id": "t",
    }  # fmt: skip
    stop = EVENTS["stop"].input_model.model_validate({"loop_count": 2})
    assert claude_input("Stop", stop, "/ws")["stop_hook_active"] is True


def test_a_stop_hook_gets_the_last_assistant_message_when_the_worker_read_it() -> None:
    stop = EVENTS["stop"].input_model.model_validate({"loop_count": 0})
    got = claude_input("Stop", stop, "/ws", "All tests pass.")
    assert got["last_assistant_message"] == "All tests pass."
    # unknown (no transcript hooks may see): absent, never made up
    assert "last_assistant_message" not in claude_input("Stop", stop, "/ws")
    # only Stop carries it
    pre = EVENTS["preToolUse"].input_model.model_validate({"tool_name": "Shell"})
    assert "last_assistant_message" not in claude_input("PreToolUse", pre, "/ws", "x")


# ---------------------------------------------------------------------------- answers


def _t(event: str, cursor: str, code: int, stdout: Any = b"", stderr: str = "") -> Any:
    data = stdout if isinstance(stdout, bytes) else json.dumps(stdout).encode()
    return translate_answer(event, EVENTS[cursor], code, data, stderr)


def test_permission_decisions() -> None:
    deny = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": "no"}}  # fmt: skip
    assert _t("PreToolUse", "preToolUse", 0, deny).answer == {
        "permission": "deny",
        "agent_message": "no",
    }
    allow = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                    "updatedInput": {"command": "ls -1"}}}  # fmt: skip
    assert _t("PreToolUse", "preToolUse", 0, allow).answer == {
        "permission": "allow",
        "updated_input": {"command": "ls -1"},
    }
    assert _t("PreToolUse", "preToolUse", 2, stderr="blocked").answer == {
        "permission": "deny",
        "agent_message": "blocked",
    }
    assert _t("PreToolUse", "preToolUse", 0, {"decision": "block", "reason": "r"}).answer == {
        "permission": "deny",
        "agent_message": "r",
    }


def test_a_top_level_ask_asks_and_is_never_a_pass() -> None:
    """The hooks spec's decision: a decision that asks for confirmation is `ask`."""
    ask = {"decision": "ask", "reason": "force-push: confirm"}
    got = _t("PreToolUse", "preToolUse", 0, ask)
    assert (got.answer, got.invalid) == ({"permission": "ask", "user_message": "force-push: "
                                          "confirm"}, None)  # fmt: skip
    assert "decision ask -> permission ask" in got.mapped
    # over an allow of the same answer the safer reading wins; a deny stays a deny
    allow = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
    assert _t("PreToolUse", "preToolUse", 0, {**allow, "decision": "ask"}).answer == {
        "permission": "ask"
    }
    deny = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}}
    assert _t("PreToolUse", "preToolUse", 0, {**deny, "decision": "ask"}).answer == {
        "permission": "deny"
    }
    # where the event cannot ask, a block; where it takes no decision, named as not mapped
    assert _t("UserPromptSubmit", "beforeSubmitPrompt", 0, ask).answer == {
        "continue": False, "user_message": "force-push: confirm"
    }  # fmt: skip
    assert _t("SubagentStart", "subagentStart", 0, ask).answer["permission"] == "deny"
    stop = _t("Stop", "stop", 0, ask)
    assert stop.answer == {} and "decision ask (stop takes no decision)" in stop.unmapped


@pytest.mark.parametrize("value", ["ASK", "Ask", "ask ", 1, None, ["ask"]])
def test_a_decision_that_only_looks_like_ask_is_invalid_not_a_pass(value: Any) -> None:
    got = _t("PreToolUse", "preToolUse", 0, {"decision": value})
    if value is None:  # JSON null: no decision given
        assert (got.answer, got.invalid) == ({}, None)
    else:
        assert got.invalid and "block, approve or ask" in got.invalid


def test_a_claude_ask_through_classify_is_an_ask_answer(tmp_path: Path) -> None:
    ws = _with_files(tmp_path, **{PROJECT: _group("PreToolUse", CMD, matcher="Bash")})
    forget_loaded_sources()
    sources = load_sources(SourceSettings(workspace=ws, claude_code=True))
    tool_input = {"command": "git push --force"}
    plan = build_plan(
        sources.loaded, "preToolUse", {"tool_name": "Shell", "tool_input": tool_input}
    )
    (hook,) = plan.hooks_to_run
    stdout = json.dumps({"decision": "ask", "reason": "confirm the force-push"}).encode()
    result = classify_claude(hook, plan.event, Execution(ExecutionStatus.OK, 0, stdout))
    assert result.outcome is Outcome.OK, result.reason
    assert result.output == {"permission": "ask", "user_message": "confirm the force-push"}
    assert "decision ask -> permission ask" in result.reason


def test_a_prompt_hooks_plain_stdout_is_context_claude_adds_and_cursor_cannot_carry() -> None:
    got = _t("UserPromptSubmit", "beforeSubmitPrompt", 0, b"Remember: staging is frozen.\n")
    assert got.answer == {}
    (reason,) = got.unmapped
    assert "adds a UserPromptSubmit hook's plain stdout to the model's context" in reason
    assert "beforeSubmitPrompt" in reason and "no context for the model" in reason
    assert "only shows it" not in reason
    ctx = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                  "additionalContext": "frozen"}}  # fmt: skip
    (reason,) = _t("UserPromptSubmit", "beforeSubmitPrompt", 0, ctx).unmapped
    assert (
        reason.startswith("additionalContext (Claude Code adds") and "beforeSubmitPrompt" in reason
    )
    # elsewhere plain stdout is still only shown by Claude Code
    assert "only shows it" in _t("Stop", "stop", 0, b"bye").unmapped[0]


def test_stop_prompt_and_post_tool() -> None:
    assert _t("Stop", "stop", 0, {"decision": "block", "reason": "go on"}).answer == {
        "followup_message": "go on"
    }
    assert _t("Stop", "stop", 2, stderr="tests fail").answer == {"followup_message": "tests fail"}
    assert _t("UserPromptSubmit", "beforeSubmitPrompt", 0,
              {"decision": "block", "reason": "secret"}).answer == {
        "continue": False, "user_message": "secret"
    }  # fmt: skip
    assert _t("UserPromptSubmit", "beforeSubmitPrompt", 0,
              {"continue": False, "stopReason": "halt"}).answer == {
        "continue": False, "user_message": "halt"
    }  # fmt: skip
    post = {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "fmt"}}
    assert _t("PostToolUse", "postToolUse", 0, post).answer == {"additional_context": "fmt"}
    assert _t("SessionStart", "sessionStart", 0, b"hello\n").answer == {
        "additional_context": "hello"
    }


def test_what_cannot_be_mapped_is_named() -> None:
    got = _t("PreToolUse", "preToolUse", 0, {
        "suppressOutput": True, "extra": 1,
        "hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "ctx"},
    })  # fmt: skip
    assert got.answer == {}
    text = " ".join(got.unmapped)
    assert "additionalContext" in text and "suppressOutput" in text and "'extra'" in text
    assert _t("UserPromptSubmit", "beforeSubmitPrompt", 0, b"plain").unmapped


@pytest.mark.parametrize(
    "stdout",
    [
        {"hookSpecificOutput": {"permissionDecision": "maybe"}},
        {"hookSpecificOutput": "deny"},
        {"decision": "perhaps"},
        {"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": [1]}},
    ],
)
def test_invalid_answers(stdout: Any) -> None:
    assert _t("PreToolUse", "preToolUse", 0, stdout).invalid


@given(
    st.binary(max_size=200),
    st.sampled_from([0, 2]),
    st.sampled_from([(e.name, e.cursor) for e in CLAUDE_EVENTS.values() if e.cursor]),
)
@settings(max_examples=300, deadline=None)
def test_translation_never_raises(stdout: bytes, code: int, events: tuple[str, str]) -> None:
    translate_answer(events[0], EVENTS[events[1]], code, stdout, "err")


# ---------------------------------------------------------------------------- sources


def _with_files(tmp_path: Path, **files: Any) -> Path:
    for name, document in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document))
    return tmp_path


def _names(workspace: Path, **kwargs: Any) -> dict[str, SourceStatus]:
    forget_loaded_sources()
    loaded = load_sources(SourceSettings(workspace=workspace, **kwargs))
    return {s.name: s.status for s in loaded.sources}


LOCAL = ".claude/settings.local.json"
PROJECT = ".claude/settings.json"


def test_sources_load_only_when_on(tmp_path: Path) -> None:
    ws = _with_files(tmp_path, **{LOCAL: _group("Stop", CMD), PROJECT: _group("Stop", CMD)})
    off = _names(ws)
    assert off["claude-project"] is SourceStatus.SKIPPED
    assert off["claude-project-local"] is SourceStatus.SKIPPED
    assert "claude-user" not in off
    on = _names(ws, claude_code=True)
    assert on["claude-project"] is SourceStatus.LOADED
    assert on["claude-project-local"] is SourceStatus.LOADED
    assert on["claude-user"] is SourceStatus.SKIPPED  # the cloud profile
    forget_loaded_sources()
    sources = load_sources(SourceSettings(workspace=ws, claude_code=True))
    plan = build_plan(sources.loaded, "stop", {"status": "completed"})
    assert [t.hooks[0].source_path.name for t in plan.tiers] == [
        "settings.local.json",
        "settings.json",
    ]
    assert [t.hooks[0].source_priority for t in plan.tiers] == [4, 5]


def test_managed_only_untrusted_and_pinned_treat_them_as_project(tmp_path: Path) -> None:
    ws = _with_files(tmp_path, **{PROJECT: _group("Stop", CMD)})
    managed = _names(ws, claude_code=True,
                     allowed=frozenset({SourceKind.ENTERPRISE, SourceKind.TEAM}))  # fmt: skip
    assert managed["claude-project"] is SourceStatus.SKIPPED
    assert _names(ws, claude_code=True, trust_workspace=False)["claude-project"] is (
        SourceStatus.SKIPPED
    )
    assert _names(ws, claude_code=True, project_digests=frozenset())["claude-project"] is (
        SourceStatus.SKIPPED
    )
    digest = pinning.compute(ws, (ws / PROJECT).read_bytes(), PROJECT).digest
    approved = _names(ws, claude_code=True, project_digests=frozenset({digest}))
    assert approved["claude-project"] is SourceStatus.LOADED


def test_the_digest_covers_the_scripts_a_claude_file_names(tmp_path: Path) -> None:
    script = tmp_path / ".claude" / "hooks" / "x.sh"
    hook = {"type": "command", "command": "sh", "args": ["$CLAUDE_PROJECT_DIR/.claude/hooks/x.sh"]}
    ws = _with_files(tmp_path, **{PROJECT: _group("Stop", hook)})
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("echo 1\n")
    before = pinning.compute(ws, (ws / PROJECT).read_bytes(), PROJECT)
    assert ".claude/hooks/x.sh" in [f.path for f in before.files]
    script.write_text("echo 2\n")
    assert pinning.compute(ws, (ws / PROJECT).read_bytes(), PROJECT).digest != before.digest


def test_the_claude_user_file_loads_on_the_desktop(tmp_path: Path) -> None:
    home = _with_files(tmp_path / "home", **{".claude/settings.json": _group("Stop", CMD)})
    ws = _with_files(tmp_path / "ws")
    got = _names(ws, claude_code=True, user_home=home, profile=Profile.DESKTOP)
    assert got["claude-user"] is SourceStatus.LOADED
    assert ClaudeOrigin.USER.rank == 6


def test_a_claude_hook_result_names_its_translation(tmp_path: Path) -> None:
    ws = _with_files(tmp_path, **{PROJECT: _group("PreToolUse", CMD, matcher="Bash")})
    forget_loaded_sources()
    sources = load_sources(SourceSettings(workspace=ws, claude_code=True))
    plan = build_plan(sources.loaded, "preToolUse", {"tool_name": "Shell", "tool_input": {}})
    (hook,) = plan.hooks_to_run
    out = json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                             "permissionDecision": "deny",
                                             "additionalContext": "x"}}).encode()  # fmt: skip
    result = classify_claude(hook, plan.event, Execution(ExecutionStatus.OK, 0, out))
    assert result.outcome is Outcome.OK and result.output == {"permission": "deny"}
    assert "Claude Code PreToolUse" in result.reason and "additionalContext" in result.reason
    assert result.ignored_fields
    failed = classify_claude(hook, plan.event, Execution(ExecutionStatus.OK, 1, b""))
    assert failed.outcome is Outcome.ERROR and "Claude Code" in failed.reason


# ---------------------------------------------------------------------------- validate


def test_validate_gives_claude_hooks_verdicts(tmp_path: Path) -> None:
    from cloudrunner.settings import Settings
    from cloudrunner.validate import validate_paths

    document = {"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [CMD, {"type": "prompt", "prompt": "p"}]}],
        "SessionStart": [{"hooks": [CMD]}],
    }}  # fmt: skip
    ws = _with_files(tmp_path, **{PROJECT: document, LOCAL: _group("Stop", CMD)})
    off = validate_paths([ws])
    assert [f.path.name for f in off.files] == ["settings.local.json", "settings.json"]
    verdicts = {(h.event, h.verdict) for f in off.files for h in f.hooks}
    assert verdicts == {("stop", "skipped"), ("preToolUse", "skipped"), ("sessionStart", "skipped")}
    assert all("sources.claude_code is off" in h.reason for f in off.files for h in f.hooks)

    settings = Settings.model_validate({"sources": {"claude_code": True}})
    on = validate_paths([ws], settings=settings)
    by_event = {h.event: h for f in on.files for h in f.hooks}
    assert by_event["preToolUse"].verdict == "runs"
    assert "Claude Code PreToolUse" in by_event["preToolUse"].reason
    assert by_event["sessionStart"].verdict == "skipped"
    assert "not available in cloud agents" in by_event["sessionStart"].reason
    codes = [d.code for f in on.files for d in f.diagnostics]
    assert "hook-skipped" in codes  # the prompt hook, reported


# ---------------------------------------------------------------------------- hostile files


def test_a_claude_file_that_escapes_the_repository_or_is_too_big_is_refused(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(_group("Stop", CMD)))
    ws = _with_files(tmp_path / "ws", **{LOCAL: {}})
    (ws / PROJECT).symlink_to(outside)
    (ws / LOCAL).write_bytes(b" " * (1024 * 1024 + 1))
    forget_loaded_sources()
    loaded = load_sources(SourceSettings(workspace=ws, claude_code=True))
    by_name = {s.name: s for s in loaded.sources}
    assert by_name["claude-project"].status is SourceStatus.BROKEN
    assert by_name["claude-project-local"].status is SourceStatus.BROKEN
    assert all(not s.hooks for s in loaded.sources if s.origin is not None)


def test_hooks_digest_prints_a_claude_files_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cloudrunner.cli import main

    ws = _with_files(tmp_path, **{PROJECT: _group("Stop", CMD)})
    assert main(["hooks", "digest", "--file", PROJECT, str(ws)]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == pinning.compute(ws, (ws / PROJECT).read_bytes(), PROJECT).digest


def test_a_changed_claude_file_is_read_again(tmp_path: Path) -> None:
    ws = _with_files(tmp_path, **{PROJECT: _group("Stop", CMD)})
    forget_loaded_sources()
    first = load_sources(SourceSettings(workspace=ws, claude_code=True))
    (ws / PROJECT).write_text(json.dumps(_group("Stop", CMD, {**CMD, "command": "echo 2"})))
    again = first.reload()
    claude = next(s for s in again.sources if s.origin is ClaudeOrigin.PROJECT)
    assert len(claude.hooks["stop"]) == 2 and SourceKind.PROJECT in again.changed
    cursor = next(s for s in again.sources if s.kind is SourceKind.PROJECT and s.origin is None)
    assert cursor.path == ws / ".cursor" / "hooks.json"
