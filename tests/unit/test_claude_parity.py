"""The Claude Code parity set (bench/parity/claude_set.json) and its reading of answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.parity.claude import agree, cursor_effect, effect, load_set, matches
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
