"""The client passes the agent's TRACEPARENT on as the `traceparent` header when it has the
W3C shape, and never a value that is not one (none could add a header of its own); the
header goes on the request a real server reads."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner import client
from cloudrunner.telemetry.traceparent import Parent, parse

VALID = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize("value", [VALID, f"  {VALID}\t", VALID[:-2] + "00"])
def test_a_traceparent_is_passed_on(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TRACEPARENT", value)
    assert client.traceparent() == value.strip()


@pytest.mark.parametrize(
    "value",
    ["", "garbage", VALID.upper(), VALID + "-extra", "ff" + VALID[2:], VALID + "\r\nX-Evil: 1",
     VALID.replace("-", "_"), VALID[:-1], "00-" + "a" * 600, VALID.replace("b7", "é", 1)],
)  # fmt: skip
def test_another_value_is_not_sent(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TRACEPARENT", value)
    assert client.traceparent() is None


def test_none_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACEPARENT", raising=False)
    assert client.traceparent() is None


@given(st.text(max_size=80))
def test_what_is_sent_is_one_header_value_the_daemon_reads(value: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRACEPARENT", value.replace("\x00", ""))
        sent = client.traceparent()
    if sent is not None:
        assert all("!" <= ch <= "~" for ch in sent)
        assert isinstance(parse(sent), Parent) or not sent.startswith("00-")


def test_the_header_reaches_the_server(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    seen: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            seen.append(conn.recv(65536))
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")

    thread = threading.Thread(target=serve)
    thread.start()
    reply = client.request(client.Endpoint(str(path)), "POST", "/v1/events/stop", b"{}",
                           trace=VALID)  # fmt: skip
    thread.join(10)
    server.close()
    assert reply.status == 200
    assert f"\r\ntraceparent: {VALID}\r\n".encode() in seen[0]
