"""The documented error types of the protocol core.

Everything the core raises is one of these (all `CloudrunnerError`s, so the CLI's error
boundary prints them as one line). A broken hooks file is not an error of this kind: it is a
`Diagnostic`, because it disables one source, not the worker.
"""

from __future__ import annotations

from collections.abc import Iterable

from cloudrunner.errors import CloudrunnerError


class ProtocolError(CloudrunnerError):
    """Base class of the core's errors."""


class UnknownEvent(ProtocolError):
    def __init__(self, event: str, known: Iterable[str]) -> None:
        self.event = event
        super().__init__(f"unknown hook event {event!r}; known events: {', '.join(sorted(known))}")


class EventNotAvailable(ProtocolError):
    """An event the profile does not run (a non-cloud event in the cloud profile)."""

    def __init__(self, event: str, profile: str, reason: str) -> None:
        self.event = event
        self.profile = profile
        self.reason = reason
        super().__init__(
            f"event {event!r} is not available in the {profile} profile: {reason}; "
            "no hook runs for it (use the desktop profile to run it outside cloud agents)"
        )


class InvalidPayload(ProtocolError):
    """The event JSON given to the worker is not usable."""

    def __init__(self, event: str, problem: str) -> None:
        self.event = event
        self.problem = problem
        super().__init__(f"invalid {event} payload: {problem}")
