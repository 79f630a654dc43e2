"""Every row of the spec's event table (section 3), cloud availability and output rules."""

from __future__ import annotations

from typing import Any

import pytest

from cloudrunner.protocol.events import (
    BLOCKING_EVENTS,
    CLOUD_EVENTS,
    EVENTS,
    Decision,
    event_spec,
    neutral_answer,
)
from cloudrunner.protocol.protocol_errors import UnknownEvent
from cloudrunner.protocol.results import _InvalidOutput, parse_output

BASE = {
    "conversation_id", "generation_id", "model", "model_id", "model_params", "hook_event_name",
    "cursor_version", "workspace_roots", "user_email", "transcript_path",
}  # fmt: skip

#: spec section 3, copied row by row: event -> (own input fields, output fields)
TABLE: dict[str, tuple[set[str], set[str]]] = {
    "preToolUse": (
        {"tool_name", "tool_input", "tool_use_id", "cwd", "agent_message"},
        {"permission", "user_message", "agent_message", "updated_input"},
    ),
    "postToolUse": (
        {"tool_name", "tool_input", "tool_output", "tool_use_id", "cwd", "duration"},
        {"updated_mcp_tool_output", "additional_context"},
    ),
    "postToolUseFailure": (
        {
            "tool_name",
            "tool_input",
            "tool_use_id",
            "cwd",
            "error_message",
            "failure_type",
            "duration",
            "is_interrupt",
        },
        set(),
    ),
    "subagentStart": (
        {
            "subagent_id",
            "subagent_type",
            "task",
            "parent_conversation_id",
            "tool_call_id",
            "subagent_model",
            "is_parallel_worker",
            "git_branch",
        },
        {"permission", "user_message"},
    ),
    "subagentStop": (
        {
            "subagent_type",
            "status",
            "task",
            "description",
            "summary",
            "duration_ms",
            "message_count",
            "tool_call_count",
            "loop_count",
            "modified_files",
            "agent_transcript_path",
        },
        {"followup_message"},
    ),
    "beforeShellExecution": (
        {"command", "cwd", "sandbox"},
        {"permission", "user_message", "agent_message"},
    ),
    "afterShellExecution": ({"command", "output", "duration", "sandbox"}, set()),
    "beforeMCPExecution": (
        {"tool_name", "tool_input", "url", "command"},
        {"permission", "user_message", "agent_message"},
    ),
    "afterMCPExecution": ({"tool_name", "tool_input", "result_json", "duration"}, set()),
    "beforeReadFile": ({"file_path", "content", "attachments"}, {"permission", "user_message"}),
    "afterFileEdit": ({"file_path", "edits"}, set()),
    "beforeSubmitPrompt": ({"prompt", "attachments"}, {"continue", "user_message"}),
    "preCompact": (
        {
            "trigger",
            "context_usage_percent",
            "context_tokens",
            "context_window_size",
            "message_count",
            "messages_to_compact",
            "is_first_compaction",
        },
        {"user_message"},
    ),
    "stop": ({"status", "loop_count"}, {"followup_message"}),
    "afterAgentResponse": ({"text"}, set()),
    "afterAgentThought": ({"text", "duration_ms"}, set()),
    "sessionStart": (
        {"session_id", "is_background_agent", "composer_mode"},
        {"env", "additional_context"},
    ),
    "sessionEnd": (
        {
            "session_id",
            "reason",
            "duration_ms",
            "is_background_agent",
            "final_status",
            "error_message",
        },
        set(),
    ),
    "beforeTabFileRead": ({"file_path", "content"}, {"permission"}),
    "afterTabFileEdit": ({"file_path", "edits"}, set()),
    "workspaceOpen": (set(), {"pluginPaths"}),
}

SPEC_CLOUD = {
    "preToolUse", "postToolUse", "postToolUseFailure", "subagentStart", "subagentStop",
    "beforeShellExecution", "afterShellExecution", "beforeReadFile", "afterFileEdit",
    "beforeSubmitPrompt", "preCompact", "stop", "afterAgentResponse", "afterAgentThought",
}  # fmt: skip

SPEC_BLOCKING = {
    "preToolUse", "beforeShellExecution", "beforeMCPExecution", "beforeReadFile",
    "subagentStart", "beforeSubmitPrompt", "beforeTabFileRead",
}  # fmt: skip


def test_the_table_has_all_21_events() -> None:
    assert set(EVENTS) == set(TABLE)
    assert len(EVENTS) == 21


@pytest.mark.parametrize("event", sorted(TABLE))
def test_input_fields_are_the_base_plus_the_events_own(event: str) -> None:
    own, _ = TABLE[event]
    assert set(EVENTS[event].input_model.model_fields) == BASE | own


@pytest.mark.parametrize("event", sorted(TABLE))
def test_output_fields_match_the_table(event: str) -> None:
    _, outputs = TABLE[event]
    assert set(EVENTS[event].output_fields) == outputs


@pytest.mark.parametrize("event", sorted(TABLE))
def test_inputs_keep_unknown_fields(event: str) -> None:
    model = EVENTS[event].input_model.model_validate({"future_field": {"a": [1]}, "x": None})
    assert model.model_extra == {"future_field": {"a": [1]}, "x": None}


def test_cloud_availability_and_reasons() -> None:
    assert set(CLOUD_EVENTS) == SPEC_CLOUD
    for name, spec in EVENTS.items():
        if name in SPEC_CLOUD:
            assert spec.in_cloud and spec.not_in_cloud_reason is None
        else:
            assert not spec.in_cloud and spec.not_in_cloud_reason
    assert "read-only" in EVENTS["sessionStart"].not_in_cloud_reason  # type: ignore[operator]
    assert "read-only" in EVENTS["beforeMCPExecution"].not_in_cloud_reason  # type: ignore[operator]
    assert "Tab" in EVENTS["afterTabFileEdit"].not_in_cloud_reason  # type: ignore[operator]
    assert "editor" in EVENTS["workspaceOpen"].not_in_cloud_reason  # type: ignore[operator]


def test_blocking_events() -> None:
    assert set(BLOCKING_EVENTS) == SPEC_BLOCKING
    assert EVENTS["beforeSubmitPrompt"].decision is Decision.CONTINUE


def test_unknown_event_is_a_documented_error() -> None:
    with pytest.raises(UnknownEvent, match="unknown hook event 'onStop'"):
        event_spec("onStop")


@pytest.mark.parametrize(
    ("event", "answer"),
    [
        ("preToolUse", {"permission": "allow"}),
        ("beforeReadFile", {"permission": "allow"}),
        ("beforeSubmitPrompt", {"continue": True}),
        ("stop", {}),
        ("afterFileEdit", {}),
    ],
)
def test_neutral_answer(event: str, answer: dict[str, Any]) -> None:
    assert neutral_answer(event) == answer


def parsed(event: str, stdout: str) -> dict[str, Any]:
    return parse_output(EVENTS[event], stdout.encode())[0]


@pytest.mark.parametrize("event", ["preToolUse", "beforeShellExecution", "beforeMCPExecution"])
@pytest.mark.parametrize("value", ["allow", "deny", "ask"])
def test_three_valued_permission(event: str, value: str) -> None:
    assert parsed(event, f'{{"permission": "{value}"}}') == {"permission": value}


@pytest.mark.parametrize("event", ["beforeReadFile", "beforeTabFileRead"])
def test_ask_is_invalid_where_only_allow_and_deny_exist(event: str) -> None:
    assert parsed(event, '{"permission": "deny"}') == {"permission": "deny"}
    with pytest.raises(_InvalidOutput):
        parsed(event, '{"permission": "ask"}')


def test_subagent_start_ask_counts_as_deny() -> None:
    assert parsed("subagentStart", '{"permission": "ask"}') == {"permission": "deny"}


@pytest.mark.parametrize(
    ("event", "stdout"),
    [
        ("preToolUse", '{"permission": "maybe"}'),
        ("preToolUse", '{"permission": "DENY"}'),
        ("preToolUse", '{"updated_input": "npm ci"}'),
        ("preToolUse", '{"user_message": 5}'),
        ("beforeSubmitPrompt", '{"continue": "false"}'),
        ("beforeSubmitPrompt", '{"continue": 0}'),
        ("sessionStart", '{"env": {"A": 1}}'),
        ("sessionStart", '{"env": ["A=1"]}'),
        ("workspaceOpen", '{"pluginPaths": "/a"}'),
        ("stop", '{"followup_message": ["x"]}'),
        ("postToolUse", '{"additional_context": {"a": 1}}'),
        ("stop", "[]"),
        ("stop", "not json"),
        ("stop", '"text"'),
    ],
)
def test_outputs_are_strict_about_known_fields(event: str, stdout: str) -> None:
    with pytest.raises(_InvalidOutput):
        parsed(event, stdout)


def test_outputs_ignore_unknown_fields_and_nulls() -> None:
    known, ignored = parse_output(
        EVENTS["preToolUse"],
        b'{"permission": "deny", "agentMessage": "x", "user_message": null}',
    )
    assert known == {"permission": "deny"}
    assert ignored == ("agentMessage",)


def test_empty_stdout_is_an_empty_answer() -> None:
    assert parsed("stop", "  \n") == {}
    assert parsed("afterFileEdit", '{"anything": 1}') == {}


def test_output_aliases_are_wire_names() -> None:
    assert parsed("beforeSubmitPrompt", '{"continue": false}') == {"continue": False}
    assert parsed("workspaceOpen", '{"pluginPaths": ["/a"]}') == {"pluginPaths": ["/a"]}
    assert parsed("postToolUse", '{"updated_mcp_tool_output": {"m": 1}}') == {
        "updated_mcp_tool_output": {"m": 1}
    }


# ---------------------------------------------------------------------- payloads we can keep

import json as _json  # noqa: E402

from hypothesis import given  # noqa: E402
from hypothesis import settings as _settings  # noqa: E402
from hypothesis import strategies as _st  # noqa: E402

from cloudrunner.protocol.events import MAX_PAYLOAD_DEPTH, payload_problem  # noqa: E402


def _nested(depth: int) -> object:
    return _json.loads('{"a":' * depth + "1" + "}" * depth)


def test_nesting_up_to_the_limit_is_kept_and_deeper_is_refused() -> None:
    assert payload_problem({"tool_input": _nested(MAX_PAYLOAD_DEPTH - 1)}) is None
    problem = payload_problem({"tool_input": _nested(MAX_PAYLOAD_DEPTH)})
    assert problem is not None and f"deeper than {MAX_PAYLOAD_DEPTH} levels" in problem
    assert "`tool_input.a.a" in problem
    # far deeper than Python's recursion limit: still one answer, no RecursionError
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert payload_problem(deep) is not None


def test_lone_surrogates_are_refused_in_keys_and_values() -> None:
    value = _json.loads('{"conversation_id": "c\\ud800"}')
    assert "`conversation_id` holds a lone UTF-16 surrogate" in (payload_problem(value) or "")
    key = _json.loads('{"tool_input": {"\\udc00\\n": 1}}')
    problem = payload_problem(key) or ""
    assert "a key under `tool_input`" in problem and "\n" not in problem
    assert payload_problem({"text": "\U0001f600 caf\u00e9 \u2028"}) is None  # valid pairs


def test_a_nul_is_refused_in_ids_and_paths_only() -> None:
    assert "`conversation_id` holds a NUL" in (payload_problem({"conversation_id": "a\x00"}) or "")
    assert "`workspace_roots`" in (payload_problem({"workspace_roots": ["/w", "/x\x00"]}) or "")
    assert payload_problem({"command": "printf 'a\\0b'\x00", "tool_input": {"x": "\x00"}}) is None


def test_a_shown_key_path_stays_one_short_line() -> None:
    key = "k\n" * 200
    problem = payload_problem({key: _nested(MAX_PAYLOAD_DEPTH)}) or ""
    assert "\n" not in problem and len(problem) < 300


_JSON = _st.recursive(
    _st.none() | _st.booleans() | _st.integers() | _st.text(alphabet=_st.characters()),
    lambda inner: (
        _st.lists(inner, max_size=3)
        | _st.dictionaries(_st.text(alphabet=_st.characters(), max_size=4), inner, max_size=3)
    ),
    max_leaves=30,
)


@given(_JSON)
@_settings(max_examples=300, deadline=None)
def test_payload_problem_is_none_exactly_when_the_payload_encodes(document: object) -> None:
    problem = payload_problem(document)
    if problem is None:
        # what the audit log and the hooks need: UTF-8 JSON
        _json.dumps(document, ensure_ascii=False).encode("utf-8")
    else:
        assert "\n" not in problem
