"""The error a daemon request ends in: a message and its stable code (the HTTP status comes
from the table of error codes, `cloudrunner.refusals`)."""

from __future__ import annotations

from cloudrunner import refusals
from cloudrunner.errors import CloudrunnerError
from cloudrunner.refusals import ErrorCode


class DaemonError(CloudrunnerError):
    """A request the daemon cannot serve; `code` is stable, its HTTP status is the one the
    table of error codes (`cloudrunner.refusals`) gives it."""

    def __init__(self, message: str, code: ErrorCode) -> None:
        super().__init__(message)
        self.code = code

    @property
    def status(self) -> int:
        return refusals.STATUS[self.code]


def draining() -> DaemonError:
    return DaemonError(
        "the daemon is shutting down; send the event again to its successor", ErrorCode.DRAINING
    )


def unknown_session(session_id: str) -> DaemonError:
    return DaemonError(
        f"no daemon session {session_id!r}; create one with POST /v1/sessions "
        "(GET /v1/sessions lists them)",
        ErrorCode.UNKNOWN_SESSION,
    )
