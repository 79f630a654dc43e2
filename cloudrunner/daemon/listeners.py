"""The daemon's listeners: the unix socket (owner-only) and, optionally, TCP (bearer
token), sharing one event loop, one daemon and its thread pools.

The unix socket, the one agent VMs use through `cloudrunner-hook`, is served by threads
(`thread_front.ThreadServer`: an event is read, handled and answered by one thread, with no
event loop or thread hand-off in between; `server.unix_front = "uvicorn"` serves it as TCP
is); TCP is served by uvicorn (`uvicorn_front`).

The loop is uvloop's (`new_loop`): every event crosses it twice (the request handed to an
event thread, the answer handed back), and on this 2-core machine uvloop took about 80 µs
of the daemon's CPU and of the latency off each event against asyncio's own loop
(`python -m bench` measures the front alone).
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
import uvloop

from cloudrunner.daemon import uvicorn_front
from cloudrunner.daemon.app import App
from cloudrunner.daemon.connections import ConnectionBook, Limits
from cloudrunner.daemon.core import Daemon
from cloudrunner.daemon.memory import Trimmer
from cloudrunner.daemon.thread_front import SPARE_THREADS, ThreadServer
from cloudrunner.daemon.threads import ElasticPool
from cloudrunner.settings import ServerSettings

#: threads for session, gate and readiness calls (a clone or an engine ping blocks)
CONTROL_THREADS = 4
#: an idle worker thread exits after this long, so thread counts shrink after a burst
THREAD_IDLE_S = 5.0
#: how often the open-connection count is looked at (for `memory.Trimmer`)
TICK_S = 2.0
#: connections waiting to be accepted (the kernel caps it at net.core.somaxconn)
BACKLOG = 4096


def new_loop() -> asyncio.AbstractEventLoop:
    """The daemon's event loop (uvloop)."""
    return uvloop.new_event_loop()


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (each idle connection holds a file
    descriptor); the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft
        return target
    return soft


def limits_from(server: ServerSettings) -> Limits:
    return Limits(
        header_timeout_s=server.header_timeout_s,
        body_timeout_s=server.body_timeout_s,
        max_header_bytes=server.max_header_bytes,
        keepalive_max_requests=server.keepalive_max_requests,
        max_connections=server.max_connections,
        max_unauthenticated=server.max_unauthenticated,
    )


def unix_socket(path: Path) -> socket.socket:
    """A listening unix socket that only its owner can connect to."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError:
        sock.close()
        raise
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(BACKLOG)
    sock.setblocking(False)
    return sock


def tcp_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


@dataclass
class Listener:
    sock: socket.socket
    book: ConnectionBook
    server: uvicorn.Server | ThreadServer
    app: App

    @property
    def address(self) -> str:
        name = self.sock.getsockname()
        if isinstance(name, str):
            return f"unix:{name}"
        host, port = name[:2]
        return f"http://{host}:{port}"


@dataclass
class Front:
    """Everything between the sockets and the daemon."""

    daemon: Daemon
    events: ElasticPool = field(init=False)
    control: ElasticPool = field(init=False)
    listeners: list[Listener] = field(default_factory=list)
    trimmer: Trimmer = field(init=False)
    _ticker: asyncio.Task[None] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        server = self.daemon.settings.server
        self.events = ElasticPool(
            server.max_concurrent_events, idle_s=THREAD_IDLE_S, name="cloudrunner-event"
        )
        self.trimmer = Trimmer(self._connection_counts)
        self.control = ElasticPool(
            CONTROL_THREADS, idle_s=THREAD_IDLE_S, name="cloudrunner-control"
        )

    async def listen(self, sock: socket.socket, token: str | None = None) -> Listener:
        """Serve the API on a bound, listening socket (a token: TCP, every request needs it)."""
        settings = self.daemon.settings.server
        book = ConnectionBook(limits_from(settings), token)
        app = App(self.daemon, self.events, self.control, token)
        loop = asyncio.get_running_loop()
        if token is None and sock.family == socket.AF_UNIX and settings.unix_front == "threads":
            threads = ThreadServer(
                sock, book, app, loop,
                max_threads=settings.max_concurrent_events + SPARE_THREADS,
                keepalive_timeout_s=settings.keepalive_timeout_s, idle_s=THREAD_IDLE_S,
            )  # fmt: skip
            threads.start()
            return self._add(Listener(sock, book, threads, app))
        config = uvicorn.Config(
            app,
            http=uvicorn_front.protocol_for(book),
            ws="none",
            lifespan="off",
            interface="asgi3",
            log_config=None,
            access_log=False,
            proxy_headers=False,
            server_header=False,
            date_header=False,
            timeout_keep_alive=int(max(1, round(settings.keepalive_timeout_s))),
            timeout_graceful_shutdown=max(1, int(settings.drain_timeout_s) + 5),
            backlog=BACKLOG,
        )
        server = await uvicorn_front.start(config, sock)
        return self._add(Listener(sock, book, server, app))

    def _add(self, listener: Listener) -> Listener:
        self.listeners.append(listener)
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick())
        return listener

    def _connection_counts(self) -> tuple[int, int]:
        books = [listener.book for listener in self.listeners]
        return sum(len(book) for book in books), sum(book.take_highest() for book in books)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self.trimmer.tick()

    def stop_accepting(self) -> None:
        for listener in self.listeners:
            if isinstance(listener.server, ThreadServer):
                listener.server.stop_accepting()
            else:
                uvicorn_front.stop_accepting(listener.server)

    async def drain(self, timeout_s: float) -> bool:
        """Stop accepting, wait for the events in flight (and their answers); True when all
        finished within `timeout_s`."""
        self.stop_accepting()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.daemon.drain, timeout_s)

    async def close(self) -> None:
        """Close every connection (answers already written stay written) and the pools."""
        if self._ticker is not None:
            self._ticker.cancel()
        loop = asyncio.get_running_loop()
        for listener in self.listeners:
            if isinstance(listener.server, ThreadServer):
                await loop.run_in_executor(None, listener.server.shut)
            else:
                await uvicorn_front.shut(listener.server)
        await loop.run_in_executor(None, self.events.shutdown)
        await loop.run_in_executor(None, self.control.shutdown)
