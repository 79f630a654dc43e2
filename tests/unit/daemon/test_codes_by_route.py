"""The table of error codes says which routes answer each code; here the real app, over a
real unix socket (and TCP for the token), is asked every route of `openapi.OPERATIONS` and
answers those codes on exactly the routes the table names. No hook runs (no engine)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudrunner import refusals
from cloudrunner.client import Endpoint, HttpReply, request
from cloudrunner.daemon.app import CONTROL_BODY_CAP
from cloudrunner.daemon.core import Daemon
from cloudrunner.daemon.listeners import tcp_socket, unix_socket
from cloudrunner.daemon.openapi import OPERATIONS, Operation
from cloudrunner.refusals import ErrorCode, Route
from cloudrunner.settings import load_settings
from tests.support.daemon_front import connect, read_all, serving

MAX_PAYLOAD = 4096
_Answers = list[tuple[Operation, tuple[int, str | None]]]
TOKEN = "0123456789abcdef0123"


def _daemon(state: Path) -> Daemon:
    overrides = {"state_dir": state, "max_payload_bytes": MAX_PAYLOAD}
    return Daemon(load_settings(overrides=overrides, environ={}))


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Endpoint]:
    path = tmp_path / "api.sock"
    with serving(_daemon(tmp_path / "state"), unix_socket(path)):
        yield Endpoint(str(path))


def _path(op: Operation, session: str = "default") -> str:
    return op.path.format(session=session, event="stop", source="project")


def _code(reply: HttpReply) -> tuple[int, str | None]:
    try:
        return reply.status, json.loads(reply.body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return reply.status, None


def _routes_answering(answers: _Answers, code: ErrorCode) -> set[Route]:
    """The routes whose operations all answered `code` (both event paths must)."""
    status = refusals.STATUS[code]
    got = {op.name for op, answer in answers if answer == (status, code.value)}
    missed = {op.name for op, answer in answers if answer != (status, code.value)}
    return got - missed


def _raw(endpoint: Endpoint, head: bytes) -> bytes:
    assert endpoint.socket_path is not None
    with connect(Path(endpoint.socket_path)) as sock:
        sock.sendall(head)
        return read_all(sock, reset_ends=False)


def test_unauthorized_on_every_route(tmp_path: Path) -> None:
    sock = tcp_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    with serving(_daemon(tmp_path), sock, TOKEN):
        wrong = Endpoint(None, "127.0.0.1", port, "not-the-token")
        answers = [(op, _code(request(wrong, op.method, _path(op), b"{}"))) for op in OPERATIONS]
    assert _routes_answering(answers, ErrorCode.UNAUTHORIZED) == set(Route)
    assert refusals.TABLE[ErrorCode.UNAUTHORIZED].routes == set(Route)


def test_length_required_on_exactly_the_routes_that_read_a_body(api: Endpoint) -> None:
    answers: _Answers = []
    for op in OPERATIONS:
        raw = _raw(api, f"{op.method} {_path(op)} HTTP/1.1\r\nHost: x\r\n"
                        "Connection: close\r\n\r\n".encode())  # fmt: skip
        status = int(raw.split(b" ", 2)[1])
        body = raw.partition(b"\r\n\r\n")[2]
        code = json.loads(body)["error"]["code"] if status >= 400 else None
        answers.append((op, (status, code)))
    assert _routes_answering(answers, ErrorCode.LENGTH_REQUIRED) == refusals.BODIES
    assert refusals.TABLE[ErrorCode.LENGTH_REQUIRED].routes == refusals.BODIES


def test_a_body_over_its_cap_is_refused_with_the_tables_code(api: Endpoint) -> None:
    answers: _Answers = []
    for op in OPERATIONS:
        if op.method != "POST":
            continue
        cap = MAX_PAYLOAD if op.name is Route.EVENT else CONTROL_BODY_CAP
        answers.append((op, _code(request(api, op.method, _path(op), b" " * (cap + 1)))))
    assert _routes_answering(answers, ErrorCode.BODY_TOO_LARGE) == refusals.CONTROL_BODIES
    assert _routes_answering(answers, ErrorCode.PAYLOAD_TOO_LARGE) == {Route.EVENT}
    assert refusals.TABLE[ErrorCode.BODY_TOO_LARGE].routes == refusals.CONTROL_BODIES


def test_unknown_session_on_exactly_the_routes_of_a_session(api: Endpoint) -> None:
    answers = [
        (op, _code(request(api, op.method, _path(op, session="nope"), b'{"state": "open"}')))
        for op in OPERATIONS
        if "{session}" in op.path
    ]
    assert _routes_answering(answers, ErrorCode.UNKNOWN_SESSION) == set(
        refusals.TABLE[ErrorCode.UNKNOWN_SESSION].routes
    )


def test_the_codes_of_no_route(api: Endpoint) -> None:
    assert _code(request(api, "GET", "/v1/nothing")) == (404, "not-found")
    assert _code(request(api, "PUT", "/v1/egress")) == (405, "method-not-allowed")
    assert {code for codes in refusals.by_status(None).values() for code in codes} == {
        ErrorCode.NOT_FOUND,
        ErrorCode.METHOD_NOT_ALLOWED,
    }
