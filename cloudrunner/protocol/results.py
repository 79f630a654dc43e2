"""Classifying one finished hook (spec section 5) into a `HookResult`.

The runner reports what happened (`Execution`: exit code, stdout, stderr, and whether the
sandbox timed it out, killed it for memory, capped its output or could not start it); this
module decides the `Outcome` and the hook's answer. A block (exit 2) and a failClosed
failure are turned into the event's blocking answer here, so the merge reads every result
the same way: by its `output`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from cloudrunner.protocol.events import Decision, EventSpec
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.sandbox_causes import CauseKind, SandboxCause

if TYPE_CHECKING:
    from cloudrunner.protocol.planned_hook import PlannedHook

#: stderr that becomes a message is trimmed and cut to this many characters
STDERR_MESSAGE_LIMIT = 2000


class ExecutionStatus(StrEnum):
    """What the sandbox saw, before the protocol looks at exit code and output."""

    OK = "ok"
    TIMEOUT = "timeout"
    OOM = "oom"
    OUTPUT_OVERFLOW = "output_overflow"
    SANDBOX_ERROR = "sandbox_error"


@dataclass(frozen=True)
class Execution:
    status: ExecutionStatus
    exit_code: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    #: the sandbox's explanation for a non-ok status (for example "killed after 10 s")
    message: str = ""
    #: a failure the sandbox caused, read from the exit code and stderr (`sandbox_causes`)
    cause: SandboxCause | None = None


@dataclass(frozen=True)
class HookResult:
    hook: PlannedHook
    outcome: Outcome
    #: the hook's answer as the merge reads it: known output fields (wire names) with a value;
    #: for a block or a failClosed failure, the event's blocking answer
    output: Mapping[str, Any]
    #: why this outcome, for people (the audit log, validate)
    reason: str
    exit_code: int | None = None
    #: stderr, decoded, trimmed and capped
    stderr: str = ""
    #: fields of the hook's JSON that the event does not know (ignored)
    ignored_fields: tuple[str, ...] = ()
    #: a failure that blocks because the hook is failClosed
    fail_closed_block: bool = False
    #: what the sandbox caused, with the stderr line that showed it (also in `reason`)
    sandbox_cause: SandboxCause | None = None

    @property
    def blocks(self) -> bool:
        """Whether this result is a block (deny, or continue: false)."""
        return self.output.get("permission") == "deny" or self.output.get("continue") is False


def _stderr_text(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace").strip()
    if len(text) > STDERR_MESSAGE_LIMIT:
        text = text[:STDERR_MESSAGE_LIMIT] + " [truncated]"
    return text


def block_answer(spec: EventSpec, message: str | None) -> dict[str, Any]:
    """The blocking answer of a decision event, with `message` where the event shows one."""
    out: dict[str, Any] = (
        {"continue": False} if spec.decision is Decision.CONTINUE else {"permission": "deny"}
    )
    where = spec.message_field()
    if message and where:
        out[where] = message
    return out


class _InvalidOutput(Exception):
    """Internal: the hook's stdout is not a valid answer (becomes invalid_output)."""


def _parse_json_object(stdout: bytes) -> dict[str, Any]:
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _InvalidOutput(f"stdout is not UTF-8 (invalid byte at offset {exc.start})") from None
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _InvalidOutput(
            f"stdout is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise _InvalidOutput(f"stdout is not usable JSON ({exc})") from None
    if not isinstance(value, dict):
        raise _InvalidOutput(f"stdout must be one JSON object, not {type(value).__name__}")
    return value


def parse_output(spec: EventSpec, stdout: bytes) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Validate stdout against the event's output model.

    Returns the known fields that have a value (wire names; `ask` already turned into `deny`
    where the event says so) and the unknown field names. Raises `_InvalidOutput`.
    """
    raw = _parse_json_object(stdout)
    try:
        model = spec.output_model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'/'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        raise _InvalidOutput(f"stdout is not a valid {spec.name} answer: {problems}") from None
    except RecursionError:
        raise _InvalidOutput("stdout is nested too deeply") from None
    known = model.model_dump(by_alias=True, exclude_none=True, exclude=set(model.model_extra or {}))
    if spec.ask_means_deny and known.get("permission") == "ask":
        known["permission"] = "deny"
    return known, tuple(model.model_extra or {})


def _failure(
    hook: PlannedHook, spec: EventSpec, outcome: Outcome, reason: str, *, exit_code: int | None,
    stderr: str, ignored: tuple[str, ...] = (), cause: SandboxCause | None = None,
) -> HookResult:  # fmt: skip
    if hook.fail_closed and spec.can_block:
        message = f"blocked: the failClosed hook {hook.describe()} failed ({outcome}: {reason})"
        return HookResult(
            hook, outcome, block_answer(spec, message), reason, exit_code, stderr, ignored,
            fail_closed_block=True, sandbox_cause=cause,
        )  # fmt: skip
    return HookResult(hook, outcome, {}, reason, exit_code, stderr, ignored, sandbox_cause=cause)


def _noted(reason: str, cause: SandboxCause | None) -> str:
    """A reason that does not fail on its own, with what stderr showed the sandbox caused."""
    if cause is None:
        return reason
    return f"{reason}; stderr shows a failure the sandbox caused: {cause.message}"


_SANDBOX_OUTCOMES = {
    ExecutionStatus.TIMEOUT: Outcome.TIMEOUT,
    ExecutionStatus.OOM: Outcome.OOM,
    ExecutionStatus.OUTPUT_OVERFLOW: Outcome.OUTPUT_OVERFLOW,
    ExecutionStatus.SANDBOX_ERROR: Outcome.SANDBOX_ERROR,
}

_SANDBOX_REASONS = {
    ExecutionStatus.TIMEOUT: "ran longer than its timeout and was killed",
    ExecutionStatus.OOM: "was killed by the memory limit",
    ExecutionStatus.OUTPUT_OVERFLOW: "wrote more than the output cap",
    ExecutionStatus.SANDBOX_ERROR: "could not be started by the sandbox",
}


#: causes the agent's own machine would show alike (the same checkout, the same script)
_SAME_ON_THE_VM = frozenset(
    {CauseKind.MISSING_SCRIPT, CauseKind.NOT_EXECUTABLE, CauseKind.CRLF_SHEBANG}
)


def classify(hook: PlannedHook, spec: EventSpec, execution: Execution) -> HookResult:
    """Turn what the sandbox saw into an outcome and an answer. Never raises."""
    stderr = _stderr_text(execution.stderr)
    status = execution.status
    if status is not ExecutionStatus.OK:
        reason = execution.message or _SANDBOX_REASONS[status]
        if status is ExecutionStatus.TIMEOUT and not execution.message:
            reason = f"ran longer than its {hook.timeout:g} s timeout and was killed"
        return _failure(
            hook, spec, _SANDBOX_OUTCOMES[status], reason, exit_code=execution.exit_code,
            stderr=stderr,
        )  # fmt: skip
    code = execution.exit_code
    cause = execution.cause
    if code is None:
        return _failure(
            hook, spec, Outcome.SANDBOX_ERROR, "the sandbox reported no exit code",
            exit_code=None, stderr=stderr,
        )  # fmt: skip
    if code == 0:
        try:
            output, ignored = parse_output(spec, execution.stdout)
        except _InvalidOutput as exc:
            return _failure(
                hook, spec, Outcome.INVALID_OUTPUT, _noted(str(exc), cause), exit_code=0,
                stderr=stderr, cause=cause,
            )  # fmt: skip
        return HookResult(
            hook, Outcome.OK, output, _noted("exit code 0", cause), 0, stderr, ignored,
            sandbox_cause=cause,
        )  # fmt: skip
    if code == 2:
        return _blocked(hook, spec, execution, stderr)
    reason = f"exit code {code}" + (f": {cause.message}" if cause else "")
    return _failure(hook, spec, Outcome.ERROR, reason, exit_code=code, stderr=stderr, cause=cause)


def _blocked(hook: PlannedHook, spec: EventSpec, execution: Execution, stderr: str) -> HookResult:
    cause = execution.cause
    if not spec.can_block:
        return HookResult(
            hook, Outcome.BLOCKED, {},
            _noted(
                f"exit code 2 on {spec.name}, which takes no decision: recorded, no other effect",
                cause,
            ),
            2, stderr, sandbox_cause=cause,
        )  # fmt: skip
    # A JSON object on stdout still supplies the messages; stderr fills in the one the event
    # shows when the JSON does not give it.
    # Read leniently: a blocking hook's answer may be otherwise invalid (say `ask` where the
    # event allows only allow/deny) and its message is still worth showing.
    try:
        given = _parse_json_object(execution.stdout)
    except _InvalidOutput:
        given = {}
    known = spec.output_fields
    output = block_answer(spec, None)
    for key in ("user_message", "agent_message"):
        if key in known and isinstance(given.get(key), str) and given[key]:
            output[key] = given[key]
    ignored = tuple(k for k in given if k not in known)
    where = spec.message_field()
    if where and where not in output and stderr:
        # the hook blocks; when its stderr shows the sandbox's doing, the agent is told so.
        # A script missing from the repository is missing on the agent's own machine too:
        # that block reads as it would there (the record still names the cause).
        told = cause is not None and cause.kind not in _SAME_ON_THE_VM
        note = f" (cloudrunner: {cause.message})" if told and cause else ""
        output[where] = stderr + note
    return HookResult(
        hook, Outcome.BLOCKED, output, _noted("exit code 2: blocks", cause), 2, stderr, ignored,
        sandbox_cause=cause,
    )  # fmt: skip


def skipped(hook: PlannedHook, reason: str) -> HookResult:
    return HookResult(hook, Outcome.SKIPPED, {}, reason)
