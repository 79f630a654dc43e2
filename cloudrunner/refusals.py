"""Every error code an event request is answered with: one table of the code, its HTTP
status and who gives it. The worker's refusals, the daemon's answers and the OpenAPI
document (`daemon.openapi`) all take their codes and statuses from here."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """In the order the OpenAPI document lists them under each status."""

    PAYLOAD_NOT_JSON = "payload-not-json"
    PAYLOAD_INVALID = "payload-invalid"
    PAYLOAD_UNENCODABLE = "payload-unencodable"
    EVENT_MISSING = "event-missing"
    INVALID_REQUEST = "invalid-request"
    UNAUTHORIZED = "unauthorized"
    UNKNOWN_EVENT = "unknown-event"
    UNKNOWN_SESSION = "unknown-session"
    #: the event names another directory than the worker's configured workspace
    WORKSPACE_MISMATCH = "workspace-mismatch"
    LENGTH_REQUIRED = "length-required"
    PAYLOAD_TOO_LARGE = "payload-too-large"
    EVENT_NOT_IN_CLOUD = "event-not-in-cloud"
    WORKSPACE_UNAVAILABLE = "workspace-unavailable"
    WORKER_ERROR = "worker-error"
    INTERNAL = "internal"
    DRAINING = "draining"
    #: the worker cannot keep the event's records: nothing ran; the client applies its policy
    AUDIT_UNWRITABLE = "audit-unwritable"
    SESSION_STATE_UNAVAILABLE = "session-state-unavailable"


_WORKER, _DAEMON = True, False

#: each code's HTTP status, and whether the worker refuses an event with it (a `refused`
#: record, audit-unwritable excepted) or the daemon answers it around the worker
TABLE: dict[ErrorCode, tuple[int, bool]] = {
    ErrorCode.PAYLOAD_NOT_JSON: (400, _WORKER),
    ErrorCode.PAYLOAD_INVALID: (400, _WORKER),
    ErrorCode.PAYLOAD_UNENCODABLE: (400, _WORKER),
    ErrorCode.EVENT_MISSING: (400, _WORKER),
    ErrorCode.INVALID_REQUEST: (400, _DAEMON),
    ErrorCode.UNAUTHORIZED: (401, _DAEMON),
    ErrorCode.UNKNOWN_EVENT: (404, _WORKER),
    ErrorCode.UNKNOWN_SESSION: (404, _DAEMON),
    ErrorCode.WORKSPACE_MISMATCH: (409, _WORKER),
    ErrorCode.LENGTH_REQUIRED: (411, _DAEMON),
    ErrorCode.PAYLOAD_TOO_LARGE: (413, _WORKER),
    ErrorCode.EVENT_NOT_IN_CLOUD: (422, _WORKER),
    ErrorCode.WORKSPACE_UNAVAILABLE: (422, _WORKER),
    ErrorCode.WORKER_ERROR: (500, _DAEMON),
    ErrorCode.INTERNAL: (500, _DAEMON),
    ErrorCode.DRAINING: (503, _DAEMON),
    ErrorCode.AUDIT_UNWRITABLE: (503, _WORKER),
    ErrorCode.SESSION_STATE_UNAVAILABLE: (503, _WORKER),
}

#: each code's HTTP status
STATUS: dict[ErrorCode, int] = {code: status for code, (status, _) in TABLE.items()}

#: the codes the worker refuses an event with (PayloadRefused.code)
WORKER_REFUSALS: frozenset[ErrorCode] = frozenset(code for code, (_, w) in TABLE.items() if w)

#: a status's description in the OpenAPI document when it is not the list of its codes
DESCRIPTIONS: dict[int, str] = {401: "unauthorized (TCP without the bearer token)"}


def status_of(code: str, default: int = 400) -> int:
    """The HTTP status of `code` (`default` for a code not in the table)."""
    try:
        return STATUS[ErrorCode(code)]
    except ValueError:
        return default


def by_status() -> dict[int, tuple[ErrorCode, ...]]:
    """The codes of each status, statuses in ascending order, codes in table order."""
    out: dict[int, list[ErrorCode]] = {}
    for code in ErrorCode:
        out.setdefault(STATUS[code], []).append(code)
    return {status: tuple(out[status]) for status in sorted(out)}
