"""The daemon's HTTP front (`cloudrunner.daemon.listeners.Front`) served from a thread of the
test process, on a real socket: for tests of the API that run no hook. Also the raw-socket
side of such tests: connecting to a unix socket, sending bytes and reading what comes back,
whether the server closed or still holds a connection, and the answers in a stream."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cloudrunner.client import Endpoint, request
from cloudrunner.daemon.core import Daemon
from cloudrunner.daemon.listeners import Front, Listener, new_loop


@contextmanager
def serving(daemon: Daemon, sock: socket.socket, token: str | None = None) -> Iterator[Listener]:
    """Serve `daemon` on the listening `sock` until the block ends; then drain and close."""
    loop = new_loop()
    front = Front(daemon)
    started = threading.Event()
    failure: list[BaseException] = []
    listener: list[Listener] = []
    stop = asyncio.Event()

    async def main() -> None:
        try:
            listener.append(await front.listen(sock, token))
        except BaseException as exc:
            failure.append(exc)
            started.set()
            return
        started.set()
        await stop.wait()
        await front.drain(5.0)
        await front.close()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    started.wait(30)
    if failure:
        raise failure[0]
    try:
        yield listener[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
        loop.close()
        daemon.close()


def connect(path: Path, timeout_s: float | None = 30.0) -> socket.socket:
    """A client connection to the unix socket at `path`, its reads and writes bounded by
    `timeout_s` (None: blocking)."""
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(timeout_s)
    sock.connect(str(path))
    return sock


def read_all(sock: socket.socket, *, reset_ends: bool = True) -> bytes:
    """Everything the server sends on `sock` until it closes; a reset ends it too unless
    `reset_ends` is false (then it raises `ConnectionResetError`)."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        if not reset_ends:
            raise
    return b"".join(chunks)


def exchange(path: Path, raw: bytes, half_close: bool = False) -> bytes:
    """Send `raw` on a new connection to `path` (then shut the sending side when
    `half_close`) and read all the server sends until it closes. A server that closes or
    resets before it has read everything is not an error: its answer is still read."""
    with connect(path) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(raw)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        return read_all(sock)


def exchange_answers(path: Path, raw: bytes, count: int) -> bytes:
    """What the server sends for `raw` up to its `count`-th answer (or its close); the
    client keeps its side open, so no front knows it is leaving."""
    with connect(path) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(raw)
        got = b""
        while not complete(got, count):
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
        return got


def content_length(head: bytes) -> int:
    """The Content-Length of an HTTP head (its start line and header lines); 0 without one."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def complete(raw: bytes, count: int) -> bool:
    """Whether `raw` holds `count` whole answers (a `100 Continue` before one aside)."""
    for _ in range(count):
        head, found, rest = raw.partition(b"\r\n\r\n")
        if not found:
            return False
        if head.startswith(b"HTTP/1.1 100 "):
            raw = rest
            head, found, rest = raw.partition(b"\r\n\r\n")
            if not found:
                return False
        length = content_length(head)
        if len(rest) < length:
            return False
        raw = rest[length:]
    return True


def answers(raw: bytes) -> list[tuple[int, bytes]]:
    """Each answer's status and body in a stream of whole answers."""
    found = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        status = int(head.split(b"\r\n")[0].split(b" ")[1])
        length = content_length(head)
        found.append((status, rest[:length]))
        raw = rest[length:]
    return found


def read_answer(sock: socket.socket) -> bytes:
    """One HTTP answer read off `sock`: its head and a body of its Content-Length, without
    waiting for a kept-alive connection to close."""
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = sock.recv(65536)
        if not chunk:
            return raw
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    length = content_length(head)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def closed(sock: socket.socket, timeout_s: float = 30.0) -> bool:
    """Whether the server closed `sock` (EOF or reset) within `timeout_s`; what it sent
    before closing is read and dropped."""
    sock.settimeout(timeout_s)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def still_open(sock: socket.socket) -> bool:
    """Whether the server still holds `sock`, asked without waiting: nothing to read, or
    data, is open; an EOF or an error is closed. The socket's timeout is kept."""
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(timeout)


def healthy(path: Path) -> bool:
    """Whether the daemon on the unix socket at `path` answers /healthz with 200."""
    return request(Endpoint(str(path)), "GET", "/healthz", timeout_s=30).status == 200
