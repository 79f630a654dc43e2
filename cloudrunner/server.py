"""The daemon's HTTP API, on a unix socket (owner-only) and optionally on TCP with a token.

Each connection is handled in its own thread (one reused from an earlier connection when
one is idle), so a slow hook in one session never delays another session's events and a
blocking docker SDK call blocks only the request that made it. A client that disconnects
mid-request does not stop its event: the hooks finish (or time out) and the audit records
are written; only the answer has nowhere to go.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hmac
import json
import re
import socket
import socketserver
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

import structlog

from cloudrunner import api_schema
from cloudrunner.client import BLOCKED_HEADER, blocks
from cloudrunner.daemon import DEFAULT_SESSION, Daemon, DaemonError

#: connections handled at once by one listener (each in its own thread)
MAX_HANDLERS = 1024
#: the largest body of a session-control request (not an event)
CONTROL_BODY_CAP = 64 * 1024
#: how much of a body refused for its size is read and dropped before the connection closes
DISCARD_CAP = 64 * 1024 * 1024

log = structlog.get_logger("cloudrunner.server")


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


def json_response(status: int, data: Any) -> Response:
    return Response(status, (json.dumps(data, ensure_ascii=False) + "\n").encode())


def error_response(error: DaemonError) -> Response:
    return json_response(error.status, {"error": {"code": error.code, "message": error.message}})


_Handler = Callable[["Request"], Response]


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, str]
    handler: _RequestHandler

    def body(self, cap: int) -> bytes:
        return self.handler.read_body(cap)

    def json_body(self) -> dict[str, Any]:
        raw = self.body(CONTROL_BODY_CAP)
        try:
            data = json.loads(raw or b"{}")
        except ValueError as exc:
            raise DaemonError(f"the body is not JSON ({exc})", "invalid-request", 400) from None
        if not isinstance(data, dict):
            raise DaemonError("the body must be a JSON object", "invalid-request", 400)
        return data


class Api:
    """Routes requests to the daemon."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        segment = r"(?P<{}>[A-Za-z0-9_.\-]+)"
        sid, event = segment.format("session"), segment.format("event")
        self.routes: list[tuple[str, re.Pattern[str], _Handler]] = [
            ("GET", re.compile(r"/healthz"), self.healthz),
            ("GET", re.compile(r"/readyz"), self.readyz),
            ("GET", re.compile(r"/metrics"), self.metrics),
            ("GET", re.compile(r"/openapi\.json"), self.openapi),
            ("POST", re.compile(rf"/v1/events/{event}"), self.event),
            ("GET", re.compile(r"/v1/sessions"), self.list_sessions),
            ("POST", re.compile(r"/v1/sessions"), self.create_session),
            ("GET", re.compile(rf"/v1/sessions/{sid}"), self.get_session),
            ("DELETE", re.compile(rf"/v1/sessions/{sid}"), self.delete_session),
            ("POST", re.compile(rf"/v1/sessions/{sid}/events/{event}"), self.event),
            ("POST", re.compile(rf"/v1/sessions/{sid}/gate"), self.gate),
        ]

    def dispatch(self, method: str, path: str, handler: _RequestHandler) -> Response:
        path = path.split("?", 1)[0]
        allowed: list[str] = []
        for route_method, pattern, func in self.routes:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if route_method != method:
                allowed.append(route_method)
                continue
            try:
                return func(Request(method, path, match.groupdict(), handler))
            except DaemonError as exc:
                return error_response(exc)
        if allowed:
            return error_response(
                DaemonError(
                    f"{method} is not allowed on {path}; use {', '.join(sorted(allowed))}",
                    "method-not-allowed",
                    405,
                )
            )
        return error_response(
            DaemonError(
                f"no route {method} {path}; GET /openapi.json describes the API", "not-found", 404
            )
        )

    # -- routes ----------------------------------------------------------------

    def healthz(self, request: Request) -> Response:
        return json_response(200, {"status": "ok"})

    def readyz(self, request: Request) -> Response:
        ready, detail = self.daemon.readiness()
        return json_response(200 if ready else 503, {"ready": ready, **detail})

    def metrics(self, request: Request) -> Response:
        return Response(200, self.daemon.metrics.render().encode(), "text/plain; version=0.0.4")

    def openapi(self, request: Request) -> Response:
        return json_response(200, api_schema.document())

    def event(self, request: Request) -> Response:
        session = request.params.get("session", DEFAULT_SESSION)
        event = request.params["event"]
        self.daemon.session_info(session)  # an unknown session is refused before the body
        cap = self.daemon.settings.max_payload_bytes
        try:
            payload = request.body(cap)
        except DaemonError as exc:
            if exc.code != "body-too-large":
                raise
            raise self.daemon.refuse_unread(
                session, event, exc.message, "payload-too-large"
            ) from None
        reply = self.daemon.handle_event(session, event, payload)
        response = json_response(200, reply.answer)
        if blocks(reply.answer):  # so the client need not parse the answer for --exit-code
            response = dataclasses.replace(response, headers=((BLOCKED_HEADER, "true"),))
        return response

    def list_sessions(self, request: Request) -> Response:
        return json_response(200, {"sessions": [s.to_dict() for s in self.daemon.sessions()]})

    def create_session(self, request: Request) -> Response:
        body = request.json_body()
        unknown = sorted(set(body) - {"workspace", "repo", "ref"})
        if unknown:
            raise DaemonError(
                f"unknown field(s) {', '.join(unknown)}; "
                "a session takes workspace, or repo and ref",
                "invalid-request",
                400,
            )
        for key in ("workspace", "repo", "ref"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise DaemonError(f'"{key}" must be a string', "invalid-request", 400)
        info = self.daemon.create_session(
            workspace=body.get("workspace"), repo=body.get("repo"), ref=body.get("ref")
        )
        return json_response(201, info.to_dict())

    def get_session(self, request: Request) -> Response:
        return json_response(200, self.daemon.session_info(request.params["session"]).to_dict())

    def delete_session(self, request: Request) -> Response:
        closed = self.daemon.close_session(request.params["session"])
        return json_response(
            200, {"session": request.params["session"], "closed_sandboxes": closed}
        )

    def gate(self, request: Request) -> Response:
        body = request.json_body()
        state = body.get("state")
        if not isinstance(state, str):
            raise DaemonError('the body must be {"state": "open"|"closed"|"auto"}',
                              "invalid-request", 400)  # fmt: skip
        return json_response(200, self.daemon.set_gate(request.params["session"], state))


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cloudrunner"
    #: a client that stops sending mid-body does not hold a thread forever
    timeout = 60
    server: _Listener

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def _serve(self, method: str) -> None:
        self._unread = 0
        self.close_connection = True
        denied = self.server.check_auth(self.headers.get("Authorization"))
        if denied is not None:
            response = error_response(denied)
        else:
            try:
                response = self.server.api.dispatch(method, self.path, self)
            except Exception as exc:  # a bug must not kill the thread silently
                log.exception("server.internal_error", path=self.path)
                response = error_response(
                    DaemonError(f"internal error: {type(exc).__name__}: {exc}", "internal", 500)
                )
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            for name, value in response.headers:
                self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(response.body)
            self.wfile.flush()
            self._discard_unread()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            log.warning("server.client_gone", path=self.path, status=response.status)

    def _discard_unread(self) -> None:
        """Read (and drop) a refused body that is still coming, up to DISCARD_CAP, so the
        client reads the refusal instead of a connection reset."""
        left = min(self._unread, DISCARD_CAP)
        while left > 0:
            chunk = self.rfile.read1(min(left, 1 << 20))
            if not chunk:
                break
            left -= len(chunk)

    def read_body(self, cap: int) -> bytes:
        length_text = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding"):
            raise DaemonError(
                "chunked bodies are not accepted; send Content-Length", "length-required", 411
            )
        if length_text is None:
            if self.command == "POST":
                raise DaemonError("a POST needs a Content-Length", "length-required", 411)
            return b""
        try:
            length = int(length_text)
        except ValueError:
            raise DaemonError(
                f"Content-Length {length_text!r} is not a number", "invalid-request", 400
            ) from None
        if length < 0:
            raise DaemonError("Content-Length is negative", "invalid-request", 400)
        if length > cap:
            self._unread = length
            raise DaemonError(
                f"the body is {length} bytes, over the {cap}-byte cap"
                + (" (max_payload_bytes in the settings)" if cap != CONTROL_BODY_CAP else ""),
                "body-too-large",
                413,
            )
        data = self.rfile.read(length)
        if len(data) != length:
            raise DaemonError(
                f"the body ended after {len(data)} of {length} bytes", "invalid-request", 400
            )
        return data

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("server.request", line=format % args)

    def address_string(self) -> str:
        return self.client_address[0] if isinstance(self.client_address, tuple) else "unix"


class _Listener(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """One listening socket: unix (no token) or TCP (a bearer token is required)."""

    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True
    #: many agent steps at once must queue, not be refused (the kernel caps it at somaxconn)
    request_queue_size = 1024

    def __init__(
        self, family: socket.AddressFamily, address: Any, api: Api, token: str | None
    ) -> None:
        self.address_family = family
        self.api = api
        self.token = token
        # A connection is handled by an idle thread when there is one, by a new one when
        # not: starting a thread per request cost 0.3-0.5 ms of system time per event. Up
        # to MAX_HANDLERS connections run at once (as many as the listen queue holds), so a
        # slow hook holds one thread and delays no other session.
        self._handlers = concurrent.futures.ThreadPoolExecutor(
            MAX_HANDLERS, thread_name_prefix="cloudrunner-request"
        )
        super().__init__(address, _RequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._handlers.submit(self.process_request_thread, request, client_address)

    def server_close(self) -> None:
        """Close the socket, then wait for every connection being handled to finish."""
        super().server_close()
        self._handlers.shutdown(wait=True)

    def check_auth(self, header: str | None) -> DaemonError | None:
        if self.token is None:
            return None
        scheme, _, value = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not value:
            return DaemonError(
                "this TCP listener needs Authorization: Bearer <token> (the --token-file's text)",
                "unauthorized",
                HTTPStatus.UNAUTHORIZED,
            )
        if not hmac.compare_digest(value.strip().encode(), self.token.encode()):
            return DaemonError("the bearer token is wrong", "unauthorized", 401)
        return None


def unix_listener(path: str, api: Api) -> _Listener:
    return _Listener(socket.AF_UNIX, path, api, None)


def tcp_listener(host: str, port: int, api: Api, token: str) -> _Listener:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return _Listener(family, (host, port), api, token)
