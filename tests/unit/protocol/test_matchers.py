"""Every row of the matcher table (spec section 4)."""

from __future__ import annotations

from typing import Any

import pytest

from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.matchers import compile_matcher, match


def matches(event: str, matcher: str | None, payload: dict[str, Any]) -> bool:
    spec = EVENTS[event]
    return match(compile_matcher(matcher), spec, spec.input_model.model_validate(payload)).matched


@pytest.mark.parametrize("event", ["preToolUse", "postToolUse", "postToolUseFailure"])
def test_tool_events_match_the_tool_type(event: str) -> None:
    assert matches(event, "Shell", {"tool_name": "Shell"})
    assert not matches(event, "Shell", {"tool_name": "Read"})
    assert matches(event, "Read|Write", {"tool_name": "Write"})
    assert matches(event, "^MCP:", {"tool_name": "MCP:github_search"})
    assert matches(event, "MCP:github_.*", {"tool_name": "MCP:github_search"})
    assert not matches(event, "MCP:slack", {"tool_name": "MCP:github_search"})


@pytest.mark.parametrize("event", ["subagentStart", "subagentStop"])
def test_subagent_events_match_the_subagent_type(event: str) -> None:
    assert matches(event, "explore|shell", {"subagent_type": "explore"})
    assert not matches(event, "explore|shell", {"subagent_type": "generalPurpose"})


@pytest.mark.parametrize("event", ["beforeShellExecution", "afterShellExecution"])
def test_shell_events_search_the_whole_command_unanchored(event: str) -> None:
    assert matches(event, "curl|wget", {"command": "cd x && curl http://a"})
    assert matches(event, r"git\s+push\s+--force", {"command": "git push --force origin"})
    assert not matches(event, "^curl", {"command": "echo curl"})


@pytest.mark.parametrize(
    ("event", "subject"),
    [
        ("beforeReadFile", "Read"),
        ("beforeTabFileRead", "TabRead"),
        ("afterFileEdit", "Write"),
        ("afterTabFileEdit", "TabWrite"),
        ("beforeSubmitPrompt", "UserPromptSubmit"),
        ("stop", "Stop"),
        ("afterAgentResponse", "AgentResponse"),
        ("afterAgentThought", "AgentThought"),
    ],
)
def test_constant_subjects(event: str, subject: str) -> None:
    assert matches(event, f"^{subject}$", {})
    assert not matches(event, "^Nothing$", {})


@pytest.mark.parametrize("matcher", [None, "", "*"])
def test_no_matcher_empty_or_star_match_everything(matcher: str | None) -> None:
    compiled = compile_matcher(matcher)
    assert compiled.matches_everything
    assert matches("preToolUse", matcher, {"tool_name": "Anything"})
    assert matches("preToolUse", matcher, {})


@pytest.mark.parametrize(
    "event", ["preCompact", "sessionStart", "sessionEnd", "beforeMCPExecution", "workspaceOpen"]
)
def test_events_without_a_matcher_field_do_not_filter(event: str) -> None:
    assert EVENTS[event].matcher_subject is None
    assert matches(event, "^never$", {})


def test_invalid_regex_never_matches() -> None:
    compiled = compile_matcher("(unclosed")
    assert not compiled.valid and compiled.error
    result = match(compiled, EVENTS["preToolUse"], EVENTS["preToolUse"].input_model())
    assert not result.matched
    assert "invalid matcher" in result.reason


def test_missing_field_is_matched_as_empty_string() -> None:
    assert not matches("preToolUse", "Shell", {})
    assert matches("preToolUse", "^$", {})
    assert matches("preToolUse", ".*", {})
