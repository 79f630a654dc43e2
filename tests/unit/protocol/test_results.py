"""Classification of one finished hook (spec section 5): every outcome."""

from __future__ import annotations

import pytest

from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.plan import build_plan
from cloudrunner.protocol.planned_hook import PlannedHook
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.protocol.results import (
    STDERR_MESSAGE_LIMIT,
    Execution,
    ExecutionStatus,
    HookResult,
    classify,
)
from tests.unit.protocol.helpers import exit_code, ok, source


def hook(
    event: str, fail_closed: bool = False, payload: dict[str, object] | None = None
) -> PlannedHook:
    src = source(
        SourceKind.PROJECT, {event: [{"command": "h", "failClosed": fail_closed, "timeout": 3}]}
    )
    return build_plan([src], event, payload or {}).hooks_to_run[0]


def result(event: str, execution: Execution, fail_closed: bool = False) -> HookResult:
    return classify(hook(event, fail_closed), EVENTS[event], execution)


def test_exit_0_with_valid_json_is_ok() -> None:
    r = result("preToolUse", ok({"permission": "ask", "user_message": "sure?"}))
    assert r.outcome is Outcome.OK
    assert r.output == {"permission": "ask", "user_message": "sure?"}
    assert r.exit_code == 0


def test_exit_0_with_empty_stdout_is_ok_and_empty() -> None:
    r = result("preToolUse", ok("  \n"))
    assert r.outcome is Outcome.OK and r.output == {}


@pytest.mark.parametrize("stdout", ["not json", "[1]", '{"permission": "perhaps"}', "\xff"])
def test_exit_0_with_bad_stdout_is_invalid_output(stdout: str) -> None:
    r = result("preToolUse", Execution(ExecutionStatus.OK, 0, stdout.encode("latin-1")))
    assert r.outcome is Outcome.INVALID_OUTPUT
    assert r.output == {}  # fail-open
    assert r.reason.startswith("stdout")


def test_exit_2_blocks_with_stderr_as_agent_message() -> None:
    r = result("beforeShellExecution", exit_code(2, stderr="  no network here\n"))
    assert r.outcome is Outcome.BLOCKED
    assert r.output == {"permission": "deny", "agent_message": "no network here"}
    assert r.blocks


def test_exit_2_json_on_stdout_supplies_the_messages() -> None:
    r = result(
        "preToolUse",
        exit_code(2, '{"permission": "allow", "user_message": "u", "agent_message": "a"}', "err"),
    )
    assert r.output == {"permission": "deny", "user_message": "u", "agent_message": "a"}


def test_exit_2_json_without_agent_message_falls_back_to_stderr() -> None:
    r = result("preToolUse", exit_code(2, '{"user_message": "u"}', "why"))
    assert r.output == {"permission": "deny", "user_message": "u", "agent_message": "why"}


def test_exit_2_on_before_submit_prompt_is_continue_false() -> None:
    r = result("beforeSubmitPrompt", exit_code(2, stderr="secret in prompt"))
    assert r.output == {"continue": False, "user_message": "secret in prompt"}
    assert r.blocks


def test_exit_2_on_read_file_puts_the_message_where_the_event_shows_one() -> None:
    r = result("beforeReadFile", exit_code(2, stderr="private"))
    assert r.output == {"permission": "deny", "user_message": "private"}


def test_exit_2_on_an_event_without_decision_has_no_effect() -> None:
    r = result("afterFileEdit", exit_code(2, '{"x": 1}', "stop"))
    assert r.outcome is Outcome.BLOCKED
    assert r.output == {} and not r.blocks
    assert "no other effect" in r.reason


def test_stderr_is_capped() -> None:
    r = result("beforeShellExecution", exit_code(2, stderr="x" * (STDERR_MESSAGE_LIMIT + 50)))
    assert len(r.output["agent_message"]) == STDERR_MESSAGE_LIMIT + len(" [truncated]")


def test_other_exit_codes_are_errors() -> None:
    for code in (1, 3, 127, -9, 255):
        r = result("preToolUse", exit_code(code))
        assert r.outcome is Outcome.ERROR and r.output == {} and str(code) in r.reason


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (ExecutionStatus.TIMEOUT, Outcome.TIMEOUT),
        (ExecutionStatus.OOM, Outcome.OOM),
        (ExecutionStatus.OUTPUT_OVERFLOW, Outcome.OUTPUT_OVERFLOW),
        (ExecutionStatus.SANDBOX_ERROR, Outcome.SANDBOX_ERROR),
    ],
)
def test_sandbox_outcomes_fail_open(status: ExecutionStatus, outcome: Outcome) -> None:
    r = result("preToolUse", Execution(status, None, b'{"permission": "deny"}'))
    assert r.outcome is outcome and outcome.is_failure
    assert r.output == {} and not r.blocks


def test_timeout_reason_names_the_timeout() -> None:
    r = result("preToolUse", Execution(ExecutionStatus.TIMEOUT))
    assert "3 s timeout" in r.reason


def test_missing_exit_code_is_a_sandbox_error() -> None:
    r = result("preToolUse", Execution(ExecutionStatus.OK, None))
    assert r.outcome is Outcome.SANDBOX_ERROR


@pytest.mark.parametrize(
    "execution",
    [
        exit_code(1),
        ok("garbage"),
        Execution(ExecutionStatus.TIMEOUT),
        Execution(ExecutionStatus.OOM),
        Execution(ExecutionStatus.OUTPUT_OVERFLOW),
        Execution(ExecutionStatus.SANDBOX_ERROR, message="image missing"),
    ],
)
def test_fail_closed_failures_block_and_say_which_hook_failed(execution: Execution) -> None:
    r = result("beforeShellExecution", execution, fail_closed=True)
    assert r.outcome.is_failure
    assert r.fail_closed_block and r.blocks
    assert r.output["permission"] == "deny"
    message = r.output["agent_message"]
    assert "failClosed hook" in message and "`h`" in message and str(r.outcome) in message


def test_fail_closed_failure_on_before_submit_prompt_stops_it() -> None:
    r = result("beforeSubmitPrompt", exit_code(1), fail_closed=True)
    assert r.output["continue"] is False and "failClosed" in r.output["user_message"]


def test_fail_closed_failure_on_an_event_without_decision_is_fail_open() -> None:
    r = result("afterFileEdit", exit_code(1), fail_closed=True)
    assert r.output == {} and not r.fail_closed_block


def test_fail_closed_does_not_touch_successful_answers() -> None:
    r = result("preToolUse", ok({"permission": "allow"}), fail_closed=True)
    assert r.outcome is Outcome.OK and r.output == {"permission": "allow"}
