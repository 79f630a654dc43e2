"""`to_execution`: where a sandbox's result meets the protocol, causes are read from stderr."""

from __future__ import annotations

from pathlib import Path

from cloudrunner.event.runner import to_execution
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.results import ExecutionStatus
from cloudrunner.protocol.sandbox_causes import CauseKind
from cloudrunner.sandbox.base import ExecResult

ATTESTED = {"image": "acme/runtime:7", "hook_user": "10001:10001", "network": "none"}


def _result(outcome: Outcome, code: int | None, stderr: bytes) -> ExecResult:
    return ExecResult(code, b"", stderr, 0.01, outcome, "", "sb-1", dict(ATTESTED))


def test_the_attested_image_uid_and_workspace_are_named() -> None:
    ws = Path("/srv/ws")
    execution = to_execution(
        _result(Outcome.ERROR, 127, b"/bin/sh: 1: npx: not found\n"), ws, "project"
    )
    assert execution.status is ExecutionStatus.OK
    assert execution.cause is not None
    assert execution.cause.message.startswith("`npx` is not in image acme/runtime:7")
    denied = to_execution(
        _result(Outcome.ERROR, 1, b"PermissionError: [Errno 13] Permission denied: '/srv/ws/x'"),
        ws,
    )
    assert denied.cause is not None and denied.cause.kind is CauseKind.WORKSPACE_NOT_WRITABLE
    assert "hook uid 10001 " in denied.cause.message


def test_a_sandbox_that_killed_the_hook_is_not_read_for_causes() -> None:
    execution = to_execution(_result(Outcome.TIMEOUT, None, b"sh: 1: npx: not found\n"))
    assert execution.status is ExecutionStatus.TIMEOUT
    assert execution.cause is None


def test_invalid_utf8_on_stderr_is_read_without_failing() -> None:
    execution = to_execution(_result(Outcome.ERROR, 127, b"\xff\xfe\nsh: 1: x: not found"))
    assert execution.cause is not None and execution.cause.kind is CauseKind.MISSING_PROGRAM
    assert execution.cause.subject == "x"
