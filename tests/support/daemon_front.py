"""The daemon's HTTP front (`cloudrunner.daemon.listeners.Front`) served from a thread of the
test process, on a real socket: for tests of the API that run no hook."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

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
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body
