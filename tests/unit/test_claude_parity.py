"""The Claude Code parity set (bench/parity/claude_set.json) and its reading of answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.parity.claude import agree, by_path_gaps, cursor_effect, effect, load_set, matches
from cloudrunner.protocol.claude_mapping import CLAUDE_EVENTS


def test_the_set_names_five_repositories_at_commits_with_recorded_answers() -> None:
    _, repos = load_set()
    assert len(repos) >= 5
    ids = [e["id"] for r in repos for e in r.events]
    assert len(ids) == len(set(ids))
    for repo in repos:
        assert len(repo.commit) == 40 and "/" in repo.repo
        for event in repo.events:
            claude = event["claude"]["hook_event_name"]
            assert CLAUDE_EVENTS[claude].cursor == event["cursor"]["event"]
            recorded = event["expect_bare"]
            assert recorded["stable"] is True and recorded["hooks"], event["id"]


def _run(code: int, stdout: Any = "", stderr: str = "") -> dict[str, Any]:
    text = stdout if isinstance(stdout, str) else json.dumps(stdout)
    return {"command": "x", "exit_code": code, "stdout": text, "stderr": stderr}


@pytest.mark.parametrize(
    ("event", "runs", "decision", "message"),
    [
        ("PreToolUse", [_run(2, stderr="no\n")], "deny", "no"),
        ("PreToolUse", [_run(0, {"hookSpecificOutput": {"permissionDecision": "ask"}})], "ask", ""),
        ("PreToolUse", [_run(0, "plain"), _run(1, stderr="x")], "allow", ""),
        ("Stop", [_run(0, {"decision": "block", "reason": "go on"})], "continue", "go on"),
        ("UserPromptSubmit", [_run(0, {"continue": False, "stopReason": "s"})], "block", "s"),
        ("PostToolUse", [_run(0, {"hookSpecificOutput": {"additionalContext": "c"}})], "none", "c"),
    ],
)
def test_claude_answers_read_by_the_documented_rules(
    event: str, runs: list[dict[str, Any]], decision: str, message: str
) -> None:
    assert effect(event, runs) == {"decision": decision, "message": message}


def test_the_daemon_answer_reads_the_same_way() -> None:
    assert cursor_effect("preToolUse", {}) == {"decision": "allow", "message": ""}
    assert cursor_effect("stop", {"followup_message": "m"}) == {
        "decision": "continue",
        "message": "m",
    }
    assert (
        agree({"decision": "deny", "message": "a"}, {"decision": "allow", "message": ""})[0]
        is False
    )


@pytest.mark.parametrize(
    ("matcher", "name", "expected"),
    [("Bash", "Bash", True), ("Bas", "Bash", False), ("Edit|Write", "Write", True),
     ("mcp__.*", "mcp__x", True), (None, "Read", True), ("*", "Read", True)],
)  # fmt: skip
def test_matchers(matcher: str | None, name: str, expected: bool) -> None:
    assert matches(matcher, name) is expected


def test_the_recorded_effects_are_the_reading_of_the_recorded_answers() -> None:
    _, repos = load_set()
    for repo in repos:
        for event in repo.events:
            recorded = event["expect_bare"]
            reading = effect(event["claude"]["hook_event_name"], recorded["hooks"])
            assert reading == recorded["effect"], event["id"]


def test_the_set_keeps_hooks_that_read_their_payload_by_path() -> None:
    document, _ = load_set()
    assert by_path_gaps(document) == []
    refusals = [
        e for r in document["repos"] if r.get("payload_by_path") for e in r["events"]
        if e["expect_bare"]["effect"]["decision"] == "deny"
    ]  # fmt: skip
    assert len(refusals) >= 2 and all(e["expect_bare"]["effect"]["message"] for e in refusals)


def _by_path_repo(name: str, *decisions: str, **fields: Any) -> dict[str, Any]:
    events = [
        {
            "id": f"{name}-{i}",
            "expect_bare": {
                "stable": True,
                "hooks": [{}],
                "effect": {"decision": d, "message": ""},
            },
        }
        for i, d in enumerate(decisions)
    ]
    repo = {"name": name, "payload_by_path": "cat /dev/stdin", "licence": "MIT"}
    return {**repo, "events": events, **fields}


@pytest.mark.parametrize(
    ("repos", "gap"),
    [
        ([], "0 repositories read the payload by path"),
        ([_by_path_repo("a", "deny", "allow")], "1 repositories read the payload by path"),
        ([_by_path_repo("a", "allow", "allow"), _by_path_repo("b", "deny", "allow")],
         "a: no event the hooks answer deny bare"),
        ([_by_path_repo("a", "deny"), _by_path_repo("b", "deny", "allow")],
         "a: no event the hooks answer allow bare"),
        ([_by_path_repo("a", "deny", "allow", licence=""), _by_path_repo("b", "deny", "allow")],
         "a: no licence named"),
        ([_by_path_repo("a", "deny", "allow", events=[{"id": "x"}]),
          _by_path_repo("b", "deny", "allow")],
         "a: bare answers missing or unstable; run record"),
        ([_by_path_repo("a", "deny", "allow", events=[
            {"id": "x", "expect_bare": {"stable": False, "hooks": [{}],
                                        "effect": {"decision": "deny", "message": ""}}}]),
          _by_path_repo("b", "deny", "allow")],
         "a: bare answers missing or unstable; run record"),
        ([{**_by_path_repo("a", "deny", "allow"), "payload_by_path": ""},
          _by_path_repo("b", "deny", "allow")],
         "1 repositories read the payload by path"),
    ],
)  # fmt: skip
def test_a_set_that_would_not_catch_unreadable_stdin_is_named(
    repos: list[dict[str, Any]], gap: str
) -> None:
    assert gap in by_path_gaps({"repos": repos})
