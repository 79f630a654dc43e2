"""The unix socket's threaded front (`cloudrunner.daemon.thread_front`) under attack and
careless use, over real sockets (no hook runs): answers byte for byte the uvicorn front's,
slow and half-sent requests, pipelining, half-closes, garbage, idle crowds without threads.
The behaviours both fronts share are tested in test_connections.py and test_app.py."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.client import Endpoint, request
from cloudrunner.daemon.core import Daemon
from cloudrunner.daemon.http_requests import BAD_REQUEST, HEADERS_TOO_LARGE
from cloudrunner.daemon.listeners import Listener, unix_socket
from cloudrunner.daemon.thread_front import SPARE_THREADS, ThreadServer
from cloudrunner.settings import load_settings
from tests.support.daemon_front import (
    answers,
    closed,
    connect,
    exchange,
    exchange_answers,
    healthy,
    read_all,
    serving,
    still_open,
)
from tests.support.waiting import wait_for

MAX_PAYLOAD = 4096
HEALTH = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def _daemon(state: Path, **server: Any) -> Daemon:
    overrides: dict[str, Any] = {"state_dir": state, "max_payload_bytes": MAX_PAYLOAD}
    overrides.update({f"server.{k}": v for k, v in server.items()})
    return Daemon(load_settings(overrides=overrides, environ={}))


@contextlib.contextmanager
def _front(tmp_path: Path, name: str = "threads", **server: Any) -> Iterator[Listener]:
    path = tmp_path / f"{name}.sock"
    with serving(_daemon(tmp_path / name, **server), unix_socket(path)) as listener:
        yield listener


@pytest.fixture
def unix(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Path, Listener]]:
    with _front(tmp_path, **getattr(request, "param", {})) as listener:
        yield Path(listener.sock.getsockname()), listener


def _wait(condition: Callable[[], object], what: str) -> None:
    """`wait_for` at the pace of a front that admits and forgets connections at once."""
    wait_for(condition, what, timeout_s=30, interval_s=0.02)


def _sessions(path: Path) -> list[str]:
    listed = json.loads(request(Endpoint(str(path)), "GET", "/v1/sessions").body)["sessions"]
    return [s["session"] for s in listed]


# --------------------------------------------------------------------------- the same answers

#: raw requests whose answers are the same, byte for byte, from either front
SAME_ANSWERS = {
    "health": HEALTH,
    "no route": b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
    "wrong method": b"DELETE /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    "openapi": b"GET /openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "no length": b"POST /v1/events/stop HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "chunked": b"POST /v1/events/stop HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"0\r\n\r\n",
    "bad length": b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n",
    "unknown session": b"POST /v1/sessions/nope/events/stop HTTP/1.1\r\nHost: x\r\n"
    b"Content-Length: 2\r\n\r\n{}",
    "payload over the cap": b"POST /v1/events/stop HTTP/1.1\r\nHost: x\r\nContent-Length: "
    + str(MAX_PAYLOAD + 1).encode()
    + b"\r\n\r\n"
    + b" " * (MAX_PAYLOAD + 1),
    "control body over the cap": b"POST /v1/egress/project HTTP/1.1\r\nHost: x\r\n"
    b"Content-Length: 70000\r\n\r\n" + b"x" * 70000,
    "bad json": b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n{",
    "http/1.0": b"GET /healthz HTTP/1.0\r\n\r\n",
    "expect continue": b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
    b"Content-Length: 2\r\n\r\n[]",
    "garbage": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 hello\r\n\r\n",
    "headers over the cap": b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
    "pipelined": HEALTH + b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n" + HEALTH,
    "percent path": b"GET /heal%74hz HTTP/1.1\r\nHost: x\r\n\r\n",
}


def test_every_answer_is_the_uvicorn_fronts_byte_for_byte(tmp_path: Path) -> None:
    with (
        _front(tmp_path, "threads") as threads,
        _front(tmp_path, "uvicorn", unix_front="uvicorn") as uvicorn,
    ):
        assert isinstance(threads.server, ThreadServer)
        assert not isinstance(uvicorn.server, ThreadServer)
        for name, raw in SAME_ANSWERS.items():
            count = 3 if name == "pipelined" else 1
            got = exchange_answers(Path(threads.sock.getsockname()), raw, count)
            want = exchange_answers(Path(uvicorn.sock.getsockname()), raw, count)
            assert got == want, f"{name}: {got[:300]!r} != {want[:300]!r}"
            assert got.startswith(b"HTTP/1.1 "), name


def test_garbage_and_oversized_headers_get_the_fronts_own_answers(
    unix: tuple[Path, Listener],
) -> None:
    path, _ = unix
    assert exchange(path, b"\x00\x01\x02 not http at all\r\n\r\n") == BAD_REQUEST
    assert exchange(path, b"GET / HTTP/1.1\r\nX: " + b"a" * 100_000) == HEADERS_TOO_LARGE
    assert healthy(path)


def test_a_client_still_sending_an_oversized_head_reads_its_431_then_the_end(
    unix: tuple[Path, Listener],
) -> None:
    """The front reads and drops what still arrives after its 431 instead of closing at
    once: a socket closed with unread bytes is reset, which can beat the answer."""
    path, _ = unix
    big = b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    for _ in range(5):
        with connect(path) as sock:
            sock.sendall(big)  # drained by the front, so never a broken pipe
            assert read_all(sock, reset_ends=False) == HEADERS_TOO_LARGE  # never a reset
    assert healthy(path)


# --------------------------------------------------------------------------- slow and partial


@pytest.mark.parametrize("unix", [{"header_timeout_s": 600.0, "body_timeout_s": 0.3}],
                         indirect=True)  # fmt: skip
def test_a_head_sent_as_it_connects_is_cut_off_by_the_body_deadline(
    unix: tuple[Path, Listener],
) -> None:
    """A thread may read a new connection's head before the thread that accepted it has
    set its header deadline; that deadline must not replace the body's (the connection
    was then never closed)."""
    path, _ = unix
    head = b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{"
    socks = []
    for _ in range(128):
        sock = connect(path, timeout_s=None)
        sock.sendall(head)
        socks.append(sock)
    for sock in socks:
        assert closed(sock), "a half-sent body outlived its body deadline"
        sock.close()
    assert healthy(path)


@pytest.mark.parametrize("unix", [{"header_timeout_s": 0.5}], indirect=True)
def test_a_slowloris_is_cut_off_but_a_request_sent_a_byte_at_a_time_in_time_is_answered(
    unix: tuple[Path, Listener],
) -> None:
    path, _ = unix
    slow = connect(path)
    for byte in HEALTH[:10]:  # never finishing its headers
        slow.sendall(bytes([byte]))
    assert closed(slow)
    patient = connect(path)
    for byte in HEALTH:  # every byte its own segment, all within the deadline
        patient.sendall(bytes([byte]))
    assert patient.recv(65536).startswith(b"HTTP/1.1 200")
    patient.close()


@pytest.mark.parametrize("unix", [{"header_timeout_s": 0.5}], indirect=True)
def test_a_pipelined_request_left_half_sent_after_an_answer_is_cut_off(
    unix: tuple[Path, Listener],
) -> None:
    path, _ = unix
    sock = connect(path)
    sock.sendall(HEALTH + b"GET /hea")  # the second request never finishes
    assert closed(sock)
    assert healthy(path)


def test_a_body_shorter_than_its_length_then_a_close_runs_nothing(
    unix: tuple[Path, Listener],
) -> None:
    path, _ = unix
    body = json.dumps({"workspace": "/"}).encode()
    raw = b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n" + body
    assert exchange(path, raw, half_close=True) == b""
    assert _sessions(path) == ["default"]


def test_a_body_sent_in_full_before_a_half_close_is_answered(
    unix: tuple[Path, Listener], tmp_path: Path
) -> None:
    path, _ = unix
    body = json.dumps({"workspace": str(tmp_path)}).encode()
    raw = b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    answer = exchange(path, raw + body, half_close=True)
    assert answer.startswith(b"HTTP/1.1 201")
    assert len(_sessions(path)) == 2


def test_a_refused_body_is_read_and_dropped_and_the_connection_serves_on(
    unix: tuple[Path, Listener],
) -> None:
    path, _ = unix
    sock = connect(path)
    big = b" " * (MAX_PAYLOAD * 4)
    sock.sendall(b"POST /v1/events/stop HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                 % len(big))  # fmt: skip
    first = sock.recv(65536)  # answered from the headers alone, before the body is sent
    assert first.startswith(b"HTTP/1.1 413") and b"payload-too-large" in first
    sock.sendall(big + HEALTH)
    assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    sock.close()


# --------------------------------------------------------------------------- connections


@pytest.mark.parametrize("unix", [{"keepalive_max_requests": 2}], indirect=True)
def test_pipelined_requests_past_the_keep_alive_cap_are_not_answered(
    unix: tuple[Path, Listener],
) -> None:
    path, _ = unix
    raw = exchange(path, HEALTH * 4)
    assert [status for status, _ in answers(raw)] == [200, 200]
    assert raw.rpartition(b"HTTP/1.1 200")[2].lower().count(b"connection: close") == 1


def test_pipelined_requests_are_answered_in_order(unix: tuple[Path, Listener]) -> None:
    path, _ = unix
    raw = (
        HEALTH
        + b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n{"
        + b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
        + b"GET /v1/sessions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    got = answers(exchange(path, raw))
    assert [status for status, _ in got] == [200, 400, 404, 200]
    assert json.loads(got[3][1])["sessions"][0]["session"] == "default"


@pytest.mark.parametrize("unix", [{"max_concurrent_events": 4}], indirect=True)
def test_an_idle_crowd_costs_no_threads(unix: tuple[Path, Listener]) -> None:
    path, listener = unix
    server = listener.server
    assert isinstance(server, ThreadServer)
    crowd = [connect(path) for _ in range(300)]
    try:
        for sock in crowd[::2]:
            sock.sendall(b"G")  # a request begun, never finished
        _wait(lambda: len(listener.book) == 300, "the crowd being admitted")
        assert healthy(path)
        # threads are bounded by the events that may run, not by the connections
        assert server.threads <= 4 + SPARE_THREADS, f"{server.threads} threads for 300"
        assert sum(still_open(sock) for sock in crowd) == 300, "the crowd is held"
    finally:
        for sock in crowd:
            sock.close()
    _wait(lambda: len(listener.book) == 0, "closed connections being forgotten")


@pytest.mark.parametrize("unix", [{"max_connections": 3}], indirect=True)
def test_at_the_cap_the_longest_idle_goes_and_busy_ones_stay(
    unix: tuple[Path, Listener],
) -> None:
    path, listener = unix
    busy = [connect(path) for _ in range(2)]
    for sock in busy:
        sock.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n")
    idle = connect(path)
    _wait(
        lambda: len(listener.book.busy) == 2 and len(listener.book) == 3,
        "two busy connections and one idle being admitted",
    )
    assert healthy(path), "the newcomer took the idle connection's place"
    assert closed(idle)
    for sock in busy:
        sock.sendall(b"[]")
        assert sock.recv(65536).startswith(b"HTTP/1.1 400"), "busy connections are kept"
        sock.close()
    assert listener.book.evicted >= 1


def test_closing_the_front_closes_idle_connections(tmp_path: Path) -> None:
    with _front(tmp_path) as listener:
        path = Path(listener.sock.getsockname())
        idle = connect(path)
        _wait(lambda: len(listener.book) == 1, "the idle connection being admitted")
    assert closed(idle)
    assert not path.exists() or not _connects(path)


def _connects(path: Path) -> bool:
    try:
        connect(path).close()
    except OSError:
        return False
    return True
