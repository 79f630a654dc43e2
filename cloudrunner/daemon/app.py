"""The daemon's HTTP API as an ASGI app (served by uvicorn, see `listeners.py`).

Requests are routed by `openapi.OPERATIONS`, the table the OpenAPI document is generated
from. Nothing blocking runs on the event loop: an event is handed to the bounded pool of
event threads (`server.max_concurrent_events`), session and readiness calls to a small pool
of their own, so an idle or slow connection costs a coroutine and never a thread. A client
that disconnects mid-request does not stop its event: the hooks finish (or time out) and the
audit records are written; only the answer has nowhere to go.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pydantic

from cloudrunner import telemetry
from cloudrunner.client import BLOCKED_HEADER, blocks
from cloudrunner.daemon import models
from cloudrunner.daemon.asgi import ClientDisconnect, Receive, Request, Response, Scope, Send
from cloudrunner.daemon.core import DEFAULT_SESSION, Daemon, DaemonError
from cloudrunner.daemon.metrics import CONTENT_TYPE
from cloudrunner.daemon.openapi import OPERATIONS, Operation, document
from cloudrunner.daemon.threads import ElasticPool
from cloudrunner.logs import get_logger
from cloudrunner.refusals import ErrorCode
from cloudrunner.version import identity
from cloudrunner.worker import EventReply

#: the largest body of a session-control request (not an event)
CONTROL_BODY_CAP = 64 * 1024

log = get_logger("cloudrunner.server")

T = TypeVar("T")
_Params = dict[str, str]


def json_response(status: int, data: Any, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    body = (json.dumps(data, ensure_ascii=False) + "\n").encode()
    return Response(status, body, headers=headers)


def error_response(error: DaemonError) -> Response:
    return json_response(error.status, {"error": {"code": error.code, "message": error.message}})


def event_response(reply: EventReply) -> Response:
    """The answer to an event (both fronts send it)."""
    headers = ((BLOCKED_HEADER, "true"),) if blocks(reply.answer) else ()
    return json_response(200, reply.answer, headers)


def internal_error(method: str, path: str, exc: Exception) -> Response:
    """A bug: the log gets everything, the client one line."""
    log.error(
        "server.internal_error",
        method=method,
        path=path,
        error_type=type(exc).__name__,
        error=str(exc),
        traceback="".join(traceback.format_exception(exc)),
    )
    return error_response(
        DaemonError(f"internal error: {type(exc).__name__}: {exc}", ErrorCode.INTERNAL)
    )


def token_matches(authorization: bytes | str | None, token: str) -> bool:
    """Whether an Authorization header carries `token` as a bearer token."""
    text = authorization.decode("latin-1") if isinstance(authorization, bytes) else authorization
    scheme, _, value = (text or "").partition(" ")
    return (
        scheme.lower() == "bearer"
        and bool(value)
        and hmac.compare_digest(value.strip().encode(), token.encode())
    )


class App:
    """One listener's ASGI app; `token` set means every request needs it as a bearer token."""

    def __init__(
        self, daemon: Daemon, events: ElasticPool, control: ElasticPool, token: str | None = None
    ) -> None:
        self.daemon = daemon
        self.events = events
        self.control = control
        self.token = token
        self._handlers: dict[str, Callable[[Request, _Params], Awaitable[Response]]] = {
            op.name: getattr(self, op.name) for op in OPERATIONS
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan and websockets are not served
            return
        request = Request(scope, receive)
        try:
            response = await self.respond(request)
        except ClientDisconnect:
            log.info("server.client_gone", path=scope.get("path"))
            return
        await response.send(send)

    async def respond(self, request: Request) -> Response:
        method, path = request.method, request.path
        try:
            if self.token is not None and not token_matches(
                request.header("authorization"), self.token
            ):
                raise _unauthorized(request.header("authorization"))
            op, params = route(method, path)
            return await self._handlers[op.name](request, params)
        except DaemonError as exc:
            return error_response(exc)
        except ClientDisconnect:
            raise
        except Exception as exc:
            return internal_error(method, path, exc)

    # -- helpers -----------------------------------------------------------------

    async def _control(self, func: Callable[..., T], *args: Any) -> T:
        return await asyncio.wrap_future(self.control.submit(func, *args))

    async def _body(self, request: Request, cap: int) -> bytes:
        length = content_length(request, cap)
        if length == 0:
            return b""
        data = await request.body()
        if len(data) != length:
            raise DaemonError(
                f"the body ended after {len(data)} of {length} bytes", ErrorCode.INVALID_REQUEST
            )
        return data

    async def _json_body(self, request: Request) -> dict[str, Any]:
        raw = await self._body(request, CONTROL_BODY_CAP)
        try:
            data = json.loads(raw or b"{}")
        except ValueError as exc:
            raise DaemonError(f"the body is not JSON ({exc})", ErrorCode.INVALID_REQUEST) from None
        if not isinstance(data, dict):
            raise DaemonError("the body must be a JSON object", ErrorCode.INVALID_REQUEST)
        return data

    # -- routes (named in openapi.OPERATIONS) -----------------------------------------

    async def healthz(self, request: Request, params: _Params) -> Response:
        return json_response(200, {"status": "ok", **identity()})

    async def readyz(self, request: Request, params: _Params) -> Response:
        ready, detail = await self._control(self.daemon.readiness)
        return json_response(200 if ready else 503, {"ready": ready, **detail})

    async def metrics(self, request: Request, params: _Params) -> Response:
        # off the loop: the readiness gauges may wait for the engine
        text = await self._control(self.daemon.metrics.render)
        return Response(200, text.encode(), CONTENT_TYPE)

    async def openapi(self, request: Request, params: _Params) -> Response:
        return json_response(200, document())

    async def event(self, request: Request, params: _Params) -> Response:
        with telemetry.front(request.header("traceparent"), "event"):
            return await self._event(request, params)

    async def _event(self, request: Request, params: _Params) -> Response:
        session = params.get("session", DEFAULT_SESSION)
        event = params["event"]
        self.daemon.session_info(session)  # an unknown session is refused before the body
        cap = self.daemon.settings.max_payload_bytes
        try:
            payload = await self._body(request, cap)
        except DaemonError as exc:
            if exc.code is not ErrorCode.BODY_TOO_LARGE:
                raise
            raise await self._control(
                self.daemon.refuse_unread, session, event, exc.message, ErrorCode.PAYLOAD_TOO_LARGE
            ) from None
        self.daemon.queue_event()  # counted (and waited for by a drain) from here on
        try:
            future = self.events.submit_to_loop(
                asyncio.get_running_loop(),
                telemetry.carry(self._handle_queued),  # the thread continues the front's span
                session,
                event,
                payload,
            )
        except BaseException:
            self.daemon.unqueue_event()
            raise
        # the event runs to its end in its thread even when this client is gone
        return event_response(await future)

    def _handle_queued(self, session: str, event: str, payload: bytes) -> EventReply:
        return self.daemon.handle_event(session, event, payload, queued=True)

    async def list_sessions(self, request: Request, params: _Params) -> Response:
        sessions = await self._control(self.daemon.sessions)
        return json_response(200, {"sessions": [s.to_dict() for s in sessions]})

    async def create_session(self, request: Request, params: _Params) -> Response:
        body = await self._json_body(request)
        try:
            spec = models.CreateSession.model_validate(body)
        except pydantic.ValidationError as exc:
            raise DaemonError(_session_problem(exc), ErrorCode.INVALID_REQUEST) from None
        info = await self._control(
            lambda: self.daemon.create_session(
                workspace=spec.workspace, repo=spec.repo, ref=spec.ref
            )
        )
        return json_response(201, info.to_dict())

    async def get_session(self, request: Request, params: _Params) -> Response:
        return json_response(200, self.daemon.session_info(params["session"]).to_dict())

    async def delete_session(self, request: Request, params: _Params) -> Response:
        closed = await self._control(self.daemon.close_session, params["session"])
        return json_response(200, {"session": params["session"], "closed_sandboxes": closed})

    async def get_egress(self, request: Request, params: _Params) -> Response:
        view = await self._control(self.daemon.egress_view)
        return json_response(200, view)

    async def set_egress(self, request: Request, params: _Params) -> Response:
        body = await self._json_body(request)
        view = await self._control(self.daemon.set_egress, params["source"], body)
        return json_response(200, view)

    async def gate(self, request: Request, params: _Params) -> Response:
        body = await self._json_body(request)
        state = body.get("state")
        if not isinstance(state, str):
            raise DaemonError('the body must be {"state": "open"|"closed"|"auto"}',
                              ErrorCode.INVALID_REQUEST)  # fmt: skip
        answer = await self._control(self.daemon.set_gate, params["session"], state)
        return json_response(200, answer)


def route(method: str, path: str) -> tuple[Operation, _Params]:
    allowed: list[str] = []
    for op in OPERATIONS:
        match = op.pattern.fullmatch(path)
        if match is None:
            continue
        if op.method != method:
            allowed.append(op.method)
            continue
        return op, match.groupdict()
    if allowed:
        raise DaemonError(
            f"{method} is not allowed on {path}; use {', '.join(sorted(allowed))}",
            ErrorCode.METHOD_NOT_ALLOWED,
        )
    raise DaemonError(
        f"no route {method} {path}; GET /openapi.json describes the API", ErrorCode.NOT_FOUND
    )


def content_length(request: Request, cap: int) -> int:
    """The body's length from its headers; DaemonError when missing, bad or over `cap`."""
    if request.header("transfer-encoding"):
        raise DaemonError(
            "chunked bodies are not accepted; send Content-Length", ErrorCode.LENGTH_REQUIRED
        )
    length_text = request.header("content-length")
    if length_text is None:
        if request.method == "POST":
            raise DaemonError("a POST needs a Content-Length", ErrorCode.LENGTH_REQUIRED)
        return 0
    try:
        length = int(length_text)
    except ValueError:
        raise DaemonError(
            f"Content-Length {length_text!r} is not a number", ErrorCode.INVALID_REQUEST
        ) from None
    if length < 0:
        raise DaemonError("Content-Length is negative", ErrorCode.INVALID_REQUEST)
    if length > cap:
        raise DaemonError(
            f"the body is {length} bytes, over the {cap}-byte cap"
            + (" (max_payload_bytes in the settings)" if cap != CONTROL_BODY_CAP else ""),
            ErrorCode.BODY_TOO_LARGE,
        )
    return length


def _session_problem(exc: pydantic.ValidationError) -> str:
    unknown = sorted(str(e["loc"][0]) for e in exc.errors() if e["type"] == "extra_forbidden")
    if unknown:
        return f"unknown field(s) {', '.join(unknown)}; a session takes workspace, or repo and ref"
    first = exc.errors()[0]
    return f'"{".".join(str(p) for p in first["loc"])}" must be a string'


def _unauthorized(header: str | None) -> DaemonError:
    if not header or not header.lower().startswith("bearer ") or not header[7:].strip():
        return DaemonError(
            "this TCP listener needs Authorization: Bearer <token> (the --token-file's text)",
            ErrorCode.UNAUTHORIZED,
        )
    return DaemonError("the bearer token is wrong", ErrorCode.UNAUTHORIZED)
