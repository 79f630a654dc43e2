"""Every error code the daemon's HTTP API answers with: one table of the code, its HTTP
status, the routes that can answer it and whether the worker refuses an event with it.

The worker's refusals (`PayloadRefused.code`), the daemon's raise sites (`DaemonError`
takes an `ErrorCode` and gets its status here), the HTTP front's own answers, the OpenAPI
document (`daemon.openapi`: every route's error replies) and the reference page of the
codes (`docsgen`) all take their codes and statuses from this table.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class ErrorCode(StrEnum):
    """In the order the OpenAPI document lists them under each status. The `#:` comment
    above each member is its meaning on the reference page."""

    #: the body is not JSON
    PAYLOAD_NOT_JSON = "payload-not-json"
    #: a field of the payload has the wrong type
    PAYLOAD_INVALID = "payload-invalid"
    #: the payload cannot be kept (nested too deep, a lone surrogate, a NUL in an id or path)
    PAYLOAD_UNENCODABLE = "payload-unencodable"
    #: the payload names no event
    EVENT_MISSING = "event-missing"
    #: a bad request around the event (Content-Length, a body cut short) or a bad session,
    #: gate or egress body
    INVALID_REQUEST = "invalid-request"
    #: a TCP request without the right bearer token
    UNAUTHORIZED = "unauthorized"
    #: no such event
    UNKNOWN_EVENT = "unknown-event"
    #: no such daemon session
    UNKNOWN_SESSION = "unknown-session"
    #: no route has this path (`GET /openapi.json` lists them)
    NOT_FOUND = "not-found"
    #: the path has a route, but not for this method
    METHOD_NOT_ALLOWED = "method-not-allowed"
    #: the event names another directory than the worker's configured workspace
    WORKSPACE_MISMATCH = "workspace-mismatch"
    #: the default session cannot be closed
    DEFAULT_SESSION = "default-session"
    #: no `Content-Length`, or a chunked body
    LENGTH_REQUIRED = "length-required"
    #: the event's body is over `max_payload_bytes` (refused unread, and recorded)
    PAYLOAD_TOO_LARGE = "payload-too-large"
    #: a session, gate or egress body over 64 KiB
    BODY_TOO_LARGE = "body-too-large"
    #: the event is not one a cloud agent sends
    EVENT_NOT_IN_CLOUD = "event-not-in-cloud"
    #: the workspace could not be cloned or adopted
    WORKSPACE_UNAVAILABLE = "workspace-unavailable"
    #: as many daemon sessions are open as `server.max_sessions` allows
    TOO_MANY_SESSIONS = "too-many-sessions"
    #: the request line and headers are over `server.max_header_bytes` (answered by the
    #: HTTP front, which then closes the connection)
    HEADERS_TOO_LARGE = "headers-too-large"
    #: the worker failed on the event
    WORKER_ERROR = "worker-error"
    #: a bug in the daemon: the log gets the traceback, the client one line
    INTERNAL = "internal"
    #: the daemon is shutting down; send the event again to its successor
    DRAINING = "draining"
    #: the worker cannot keep the event's records: nothing ran; the client applies its policy
    AUDIT_UNWRITABLE = "audit-unwritable"
    #: the conversation's state could not be read or written
    SESSION_STATE_UNAVAILABLE = "session-state-unavailable"
    #: the egress proxy could not take the new rules
    EGRESS_UNAVAILABLE = "egress-unavailable"


class Route(StrEnum):
    """The API's routes by the name of their handler (`daemon.openapi.OPERATIONS` gives each
    its method and path; the two event paths share `event`)."""

    HEALTHZ = "healthz"
    READYZ = "readyz"
    METRICS = "metrics"
    OPENAPI = "openapi"
    EVENT = "event"
    LIST_SESSIONS = "list_sessions"
    CREATE_SESSION = "create_session"
    GET_SESSION = "get_session"
    DELETE_SESSION = "delete_session"
    GET_EGRESS = "get_egress"
    SET_EGRESS = "set_egress"
    GATE = "gate"


class Entry(NamedTuple):
    status: int
    """the HTTP status it is answered with"""
    worker: bool
    """the worker refuses an event with it (a `refused` record, audit-unwritable excepted);
    False: the daemon or its HTTP front answers it around the worker"""
    routes: frozenset[Route]
    """the routes that can answer it; empty: a request that matches no route"""


_WORKER, _DAEMON = True, False

#: every route (the bearer token, the header cap and a bug are checked on each)
EVERY_ROUTE: frozenset[Route] = frozenset(Route)
#: the routes that read a JSON body of their own (capped at 64 KiB), not an event
CONTROL_BODIES: frozenset[Route] = frozenset({Route.CREATE_SESSION, Route.GATE, Route.SET_EGRESS})
#: the routes that read a body, so need its Content-Length
BODIES: frozenset[Route] = CONTROL_BODIES | {Route.EVENT}
#: a request that matches no route
NO_ROUTE: frozenset[Route] = frozenset()
_EVENT = frozenset({Route.EVENT})
_SESSION = frozenset({Route.EVENT, Route.GET_SESSION, Route.DELETE_SESSION, Route.GATE})

#: each code's status, who gives it and on which routes
TABLE: dict[ErrorCode, Entry] = {
    ErrorCode.PAYLOAD_NOT_JSON: Entry(400, _WORKER, _EVENT),
    ErrorCode.PAYLOAD_INVALID: Entry(400, _WORKER, _EVENT),
    ErrorCode.PAYLOAD_UNENCODABLE: Entry(400, _WORKER, _EVENT),
    ErrorCode.EVENT_MISSING: Entry(400, _WORKER, _EVENT),
    ErrorCode.INVALID_REQUEST: Entry(400, _DAEMON, BODIES),
    ErrorCode.UNAUTHORIZED: Entry(401, _DAEMON, EVERY_ROUTE),
    ErrorCode.UNKNOWN_EVENT: Entry(404, _WORKER, _EVENT),
    ErrorCode.UNKNOWN_SESSION: Entry(404, _DAEMON, _SESSION),
    ErrorCode.NOT_FOUND: Entry(404, _DAEMON, NO_ROUTE),
    ErrorCode.METHOD_NOT_ALLOWED: Entry(405, _DAEMON, NO_ROUTE),
    ErrorCode.WORKSPACE_MISMATCH: Entry(409, _WORKER, _EVENT),
    ErrorCode.DEFAULT_SESSION: Entry(409, _DAEMON, frozenset({Route.DELETE_SESSION})),
    ErrorCode.LENGTH_REQUIRED: Entry(411, _DAEMON, BODIES),
    ErrorCode.PAYLOAD_TOO_LARGE: Entry(413, _WORKER, _EVENT),
    ErrorCode.BODY_TOO_LARGE: Entry(413, _DAEMON, CONTROL_BODIES),
    ErrorCode.EVENT_NOT_IN_CLOUD: Entry(422, _WORKER, _EVENT),
    ErrorCode.WORKSPACE_UNAVAILABLE: Entry(422, _WORKER, _EVENT),
    ErrorCode.TOO_MANY_SESSIONS: Entry(429, _DAEMON, frozenset({Route.CREATE_SESSION})),
    ErrorCode.HEADERS_TOO_LARGE: Entry(431, _DAEMON, EVERY_ROUTE),
    ErrorCode.WORKER_ERROR: Entry(500, _DAEMON, _EVENT),
    ErrorCode.INTERNAL: Entry(500, _DAEMON, EVERY_ROUTE),
    ErrorCode.DRAINING: Entry(503, _DAEMON, _EVENT),
    ErrorCode.AUDIT_UNWRITABLE: Entry(503, _WORKER, _EVENT),
    ErrorCode.SESSION_STATE_UNAVAILABLE: Entry(503, _WORKER, _EVENT),
    ErrorCode.EGRESS_UNAVAILABLE: Entry(503, _DAEMON, frozenset({Route.SET_EGRESS})),
}

#: each code's HTTP status
STATUS: dict[ErrorCode, int] = {code: entry.status for code, entry in TABLE.items()}

#: the codes the worker refuses an event with (PayloadRefused.code)
WORKER_REFUSALS: frozenset[ErrorCode] = frozenset(c for c, e in TABLE.items() if e.worker)

#: a status's description in the OpenAPI document when it is not the list of its codes
DESCRIPTIONS: dict[int, str] = {401: "unauthorized (TCP without the bearer token)"}


def status_of(code: str, default: int = 400) -> int:
    """The HTTP status of `code` (`default` for a code not in the table)."""
    try:
        return STATUS[ErrorCode(code)]
    except ValueError:
        return default


def by_status(route: Route | None = None) -> dict[int, tuple[ErrorCode, ...]]:
    """The codes of each status, statuses in ascending order, codes in table order: those
    `route` can answer, or with None those of a request that matches no route."""
    out: dict[int, list[ErrorCode]] = {}
    for code, entry in TABLE.items():
        if (route in entry.routes) if route is not None else not entry.routes:
            out.setdefault(entry.status, []).append(code)
    return {status: tuple(out[status]) for status in sorted(out)}
