"""What the event path raises: `Refusal` inside the stages, `PayloadRefused` to callers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cloudrunner.errors import CloudrunnerError
from cloudrunner.refusals import ErrorCode

#: the exit code of `run` when the audit log cannot take an event's first record
#: (sysexits' EX_IOERR)
AUDIT_UNWRITABLE_EXIT = 74


class PayloadRefused(CloudrunnerError):
    """The event was refused before any hook ran (recorded in the audit log).

    `code` is stable (the daemon's API answers with it): one of `refusals.WORKER_REFUSALS`,
    with its HTTP status in the table of `cloudrunner.refusals`.
    """

    def __init__(self, message: str, code: ErrorCode) -> None:
        super().__init__(message)
        self.code = code


class EventNotRecorded(PayloadRefused):
    """The event's first record could not be written (disk full, I/O error, permission), so
    no hook ran; code `audit-unwritable`. Unlike other refusals it is *not* in the log."""

    exit_code = AUDIT_UNWRITABLE_EXIT

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.AUDIT_UNWRITABLE)


class Refusal(CloudrunnerError):
    """A stage's reason to refuse the event, with its code. The pipeline records it and
    raises PayloadRefused; a stage never writes the record itself.

    `event` and `document` are given by the intake (before the event is known); later
    stages leave them None and the pipeline fills in the intake's. `keep_payload` False for
    a payload that cannot be encoded (its ids are kept escaped, the payload not at all)."""

    def __init__(
        self,
        message: str,
        code: ErrorCode,
        *,
        event: str | None = None,
        document: Mapping[str, Any] | None = None,
        keep_payload: bool = True,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.event = event
        self.document = document
        self.keep_payload = keep_payload
