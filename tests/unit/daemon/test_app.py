"""The HTTP layer over a real unix socket: routing, errors, body caps, the bearer token.
Nothing here runs a hook, so no engine is needed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudrunner.client import Endpoint, HttpReply, request
from cloudrunner.daemon.app import CONTROL_BODY_CAP
from cloudrunner.daemon.core import Daemon
from cloudrunner.daemon.listeners import tcp_socket, unix_socket
from cloudrunner.settings import load_settings
from cloudrunner.version import identity
from tests.support.daemon_front import connect, read_answer, serving


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Endpoint]:
    daemon = Daemon(load_settings(overrides={"state_dir": tmp_path}, environ={}))
    path = tmp_path / "api.sock"
    with serving(daemon, unix_socket(path)):
        yield Endpoint(str(path))


def _error(reply: HttpReply) -> tuple[int, str]:
    return reply.status, json.loads(reply.body)["error"]["code"]


def test_health_and_openapi(api: Endpoint) -> None:
    assert json.loads(request(api, "GET", "/healthz").body) == {"status": "ok", **identity()}
    spec = json.loads(request(api, "GET", "/openapi.json").body)
    assert spec["openapi"] == "3.1.0" and "/v1/events/{event}" in spec["paths"]


def test_routes_methods_and_sessions(api: Endpoint, tmp_path: Path) -> None:
    assert _error(request(api, "GET", "/nope")) == (404, "not-found")
    assert _error(request(api, "DELETE", "/healthz")) == (405, "method-not-allowed")
    created = request(
        api, "POST", "/v1/sessions", json.dumps({"workspace": str(tmp_path)}).encode()
    )
    assert created.status == 201
    sid = json.loads(created.body)["session"]
    assert json.loads(request(api, "GET", f"/v1/sessions/{sid}").body)["workspace"] == str(tmp_path)
    assert _error(request(api, "POST", "/v1/sessions", b'{"colour": "red"}')) == (
        400, "invalid-request"
    )  # fmt: skip
    assert _error(request(api, "POST", "/v1/sessions", b"[]")) == (400, "invalid-request")
    assert _error(request(api, "POST", "/v1/sessions", b"{")) == (400, "invalid-request")
    assert _error(request(api, "POST", f"/v1/sessions/{sid}/gate", b'{"state": 1}')) == (
        400, "invalid-request"
    )  # fmt: skip
    big = b'{"workspace": "' + b"x" * CONTROL_BODY_CAP + b'"}'
    assert _error(request(api, "POST", "/v1/sessions", big)) == (413, "body-too-large")
    assert _error(request(api, "POST", "/v1/sessions/nope/events/stop", b"{}")) == (
        404, "unknown-session"
    )  # fmt: skip


def test_chunked_bodies_are_refused(api: Endpoint) -> None:
    assert api.socket_path is not None
    with connect(Path(api.socket_path), timeout_s=None) as sock:
        sock.sendall(
            b"POST /v1/events/stop HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        raw = read_answer(sock)
    assert raw.startswith(b"HTTP/1.1 411") and b"length-required" in raw


def test_tcp_checks_the_bearer_token(tmp_path: Path) -> None:
    daemon = Daemon(load_settings(overrides={"state_dir": tmp_path}, environ={}))
    sock = tcp_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    with serving(daemon, sock, "0123456789abcdef0123"):
        for token in (None, "wrong", "0123456789abcdef012"):
            reply = request(Endpoint(None, "127.0.0.1", port, token), "GET", "/healthz")
            assert _error(reply) == (401, "unauthorized")
        good = Endpoint(None, "127.0.0.1", port, "0123456789abcdef0123")
        assert request(good, "GET", "/healthz").status == 200
