"""The front door under attack and careless use, over real sockets (no hook runs): header
and body deadlines, the header cap, per-listener connection bounds, the pre-auth bound on
TCP, keep-alive limits, internal errors."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.client import Endpoint, request
from cloudrunner.daemon.core import Daemon
from cloudrunner.daemon.http_requests import BAD_REQUEST, HEADERS_TOO_LARGE
from cloudrunner.daemon.listeners import Listener, tcp_socket, unix_socket
from cloudrunner.logs import configure_logging
from cloudrunner.settings import load_settings
from tests.support.daemon_front import (
    closed,
    connect,
    exchange,
    healthy,
    read_all,
    read_answer,
    serving,
)
from tests.support.waiting import wait_for

TOKEN = "0123456789abcdef0123"
HEALTH = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def _daemon(tmp_path: Path, **server: Any) -> Daemon:
    overrides: dict[str, Any] = {"state_dir": tmp_path}
    overrides.update({f"server.{k}": v for k, v in server.items()})
    return Daemon(load_settings(overrides=overrides, environ={}))


@pytest.fixture
def unix(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Path, Listener]]:
    server = getattr(request, "param", {})
    path = tmp_path / "api.sock"
    with serving(_daemon(tmp_path, **server), unix_socket(path)) as listener:
        yield path, listener


def _count_closed(socks: list[socket.socket], timeout_s: float) -> int:
    """How many of `socks` the server closed (EOF or reset) within `timeout_s`, all
    watched at once (as `closed` each, without waiting out the window once per socket)."""
    open_ = {sock.fileno(): sock for sock in socks}
    count = 0
    deadline = time.monotonic() + timeout_s
    while open_ and (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select(list(open_.values()), [], [], left)
        for sock in readable:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                data = b""
            if not data:
                del open_[sock.fileno()]
                count += 1
    return count


@pytest.mark.parametrize("unix", [{"header_timeout_s": 0.5}], indirect=True)
def test_silent_and_slow_header_clients_are_disconnected(unix: tuple[Path, Listener]) -> None:
    path, _ = unix
    silent = connect(path)
    slow = connect(path)
    for byte in HEALTH[:8]:  # one byte at a time, never finishing the headers
        try:
            slow.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            break  # already cut off: on a busy machine the deadline passes mid-trickle
        assert healthy(path)
        time.sleep(0.05)  # pacing, not a wait: the header trickles in past its timeout
    assert closed(silent) and closed(slow)
    assert healthy(path)


@pytest.mark.parametrize("unix", [{"body_timeout_s": 0.5}], indirect=True)
def test_a_body_that_stops_coming_is_cut_off(unix: tuple[Path, Listener]) -> None:
    path, _ = unix
    sock = connect(path)
    sock.sendall(b'POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"wo')
    assert closed(sock)
    assert healthy(path)


def test_a_megabyte_of_headers_is_refused_with_431(unix: tuple[Path, Listener]) -> None:
    path, _ = unix
    for size in (1 << 20, 100_000):  # streamed past the cap; complete but over it
        # refused before it was all sent: the answer is still there to read
        raw = exchange(path, b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * size + b"\r\n\r\n")
        assert raw.startswith(b"HTTP/1.1 431"), raw[:100]
        assert json.loads(raw.partition(b"\r\n\r\n")[2])["error"]["code"] == "headers-too-large"
    assert healthy(path)


@pytest.mark.parametrize("unix", [{"max_connections": 5}], indirect=True)
def test_at_the_cap_a_new_connection_replaces_the_longest_idle(
    unix: tuple[Path, Listener],
) -> None:
    path, listener = unix
    idle = [connect(path) for _ in range(5)]
    wait_for(
        lambda: len(listener.book.idle) == 5, "the five connections being admitted", interval_s=0.01
    )
    assert healthy(path), "the newcomer took the place of an idle connection"
    assert closed(idle[0]), "the oldest idle connection went"
    # five requests waiting for their bodies are busy: nothing to evict, the newcomer goes
    busy = [connect(path) for _ in range(5)]
    for sock in busy:
        sock.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n")
    wait_for(
        lambda: len(listener.book.busy) == 5, "the five requests being under way", interval_s=0.01
    )
    late = connect(path)
    assert closed(late, 10)
    assert listener.book.refused >= 1
    for sock in busy:
        sock.sendall(b'{"ws": 1}')
        assert b'"invalid-request"' in read_answer(sock)
        sock.close()
    assert healthy(path)


def test_tcp_unauthenticated_connections_are_bounded_apart(tmp_path: Path) -> None:
    sock = tcp_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    daemon = _daemon(tmp_path, max_unauthenticated=10, max_connections=4)
    with serving(daemon, sock, TOKEN) as listener:
        strangers = []
        for _ in range(50):
            conn = socket.create_connection(("127.0.0.1", port), timeout=30)
            strangers.append(conn)
        good = Endpoint(None, "127.0.0.1", port, TOKEN)
        for _ in range(10):  # more than max_connections: answered ones make room
            assert request(good, "GET", "/healthz", timeout_s=30).status == 200
        gone = _count_closed(strangers, 0.5)
        assert gone >= 40, "at most max_unauthenticated strangers are held"
        assert len(listener.book.unauthenticated) <= 10
        # a wrong token is answered 401 and the connection closes
        bad = socket.create_connection(("127.0.0.1", port), timeout=30)
        bad.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n\r\n")
        assert read_all(bad).startswith(b"HTTP/1.1 401")
        for conn in [*strangers, bad]:
            conn.close()


def test_a_tcp_client_still_sending_reads_its_431_or_400_then_the_end(tmp_path: Path) -> None:
    """After an answer it closes on, the TCP front (uvicorn's) reads and drops what the
    client still sends instead of closing at once: a socket closed with unread bytes is
    reset, and on TCP the reset reached the client before the answer, every time."""
    sock = tcp_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    big_head = b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    not_http = b"\x16\x03\x01 not http\r\n\r\n" + b"x" * (1 << 20)
    with serving(_daemon(tmp_path), sock, TOKEN):
        for raw, answer in ((big_head, HEADERS_TOO_LARGE), (not_http, BAD_REQUEST)):
            for half_close in (True, False, True):
                with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
                    conn.sendall(raw)  # drained by the front, so never a broken pipe
                    if half_close:  # the front closes as soon as it sees the end
                        conn.shutdown(socket.SHUT_WR)
                    # otherwise the linger ends it: the answer, then the end, never a reset
                    assert read_all(conn, reset_ends=False) == answer
        good = Endpoint(None, "127.0.0.1", port, TOKEN)
        assert request(good, "GET", "/healthz", timeout_s=30).status == 200


@pytest.mark.parametrize("unix", [{"keepalive_max_requests": 3}], indirect=True)
def test_keep_alive_ends_after_the_request_limit(unix: tuple[Path, Listener]) -> None:
    path, _ = unix
    raw = exchange(path, HEALTH * 3)
    assert raw.count(b"HTTP/1.1 200") == 3
    assert raw.rpartition(b"HTTP/1.1 200")[2].lower().count(b"connection: close") == 1


def test_a_request_sent_in_full_before_the_client_half_closes_is_answered(
    unix: tuple[Path, Listener],
) -> None:
    path, _ = unix
    assert exchange(path, HEALTH, half_close=True).startswith(b"HTTP/1.1 200")


def test_an_internal_error_is_logged_whole_and_answered_in_one_line(
    unix: tuple[Path, Listener], capsys: pytest.CaptureFixture[str]
) -> None:
    path, listener = unix
    configure_logging("error")
    daemon = listener.app.daemon

    def broken() -> list[Any]:
        raise RuntimeError("the registry fell over")

    daemon.sessions = broken
    reply = request(Endpoint(str(path)), "GET", "/v1/sessions")
    assert reply.status == 500
    error = json.loads(reply.body)["error"]
    assert error["code"] == "internal" and "\n" not in error["message"]
    assert "RuntimeError: the registry fell over" in error["message"]
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if "server.internal_error" in line)
    logged = json.loads(line)
    assert logged["error_type"] == "RuntimeError" and logged["path"] == "/v1/sessions"
    assert logged["traceback"].startswith("Traceback")
    assert "in broken" in logged["traceback"] and "the registry fell over" in logged["traceback"]


def test_repository_urls_with_a_password_are_refused_and_never_stored(
    unix: tuple[Path, Listener], tmp_path: Path
) -> None:
    path, _ = unix
    endpoint = Endpoint(str(path))
    body = json.dumps({"repo": "https://bob:hunter2@example.invalid/r.git"}).encode()
    reply = request(endpoint, "POST", "/v1/sessions", body)
    assert reply.status == 400
    message = json.loads(reply.body)["error"]["message"]
    assert "hunter2" not in message and "credential_env" in message
    ok = request(endpoint, "POST", "/v1/sessions", b'{"repo": "ssh://git@example.invalid/r"}')
    assert ok.status == 201
    listed = json.loads(request(endpoint, "GET", "/v1/sessions").body)["sessions"]
    assert [s["repo"] for s in listed if s["repo"]] == ["ssh://example.invalid/r"]
    registry = (tmp_path / "daemon" / "sessions.json").read_text()
    assert "hunter2" not in registry and "ssh://git@example.invalid/r" in registry


def test_a_password_in_an_older_registry_is_scrubbed_on_start(tmp_path: Path) -> None:
    registry = tmp_path / "daemon" / "sessions.json"
    registry.parent.mkdir(parents=True)
    old = {"session": "abc", "workspace": None, "repo": "https://u:s3cret@h.invalid/r.git",
           "ref": "main", "created_at": "2026-01-01T00:00:00Z"}  # fmt: skip
    registry.write_text(json.dumps({"sessions": [old]}))
    daemon = _daemon(tmp_path)
    try:
        assert "s3cret" not in registry.read_text()
        assert daemon.session_info("abc").to_dict()["repo"] == "https://h.invalid/r.git"
    finally:
        daemon.close()
