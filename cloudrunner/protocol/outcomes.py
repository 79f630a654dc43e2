"""The outcomes of running one hook (spec/HOOKS.md section 5)."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    OK = "ok"
    #: exit code 2: the hook blocks the action
    BLOCKED = "blocked"
    #: any exit code other than 0 and 2
    ERROR = "error"
    TIMEOUT = "timeout"
    #: exit 0 but stdout is not one JSON object valid for the event's output model
    INVALID_OUTPUT = "invalid_output"
    #: stdout or stderr went over the cap
    OUTPUT_OVERFLOW = "output_overflow"
    #: killed by the memory limit
    OOM = "oom"
    #: the sandbox could not run the hook (missing image, engine down, agent dead, ...)
    SANDBOX_ERROR = "sandbox_error"
    #: the hook's matcher was still searching when its time budget (matcher_timeout_ms) ran
    #: out: the hook did not run (a block when it is failClosed)
    MATCH_TIMEOUT = "match_timeout"
    #: not run, with a reason (gated, short-circuited, over loop budget, invalid matcher, ...)
    SKIPPED = "skipped"

    @property
    def is_failure(self) -> bool:
        """Every outcome but ok, blocked and skipped is a failure (fail-open unless failClosed)."""
        return self not in (Outcome.OK, Outcome.BLOCKED, Outcome.SKIPPED)
