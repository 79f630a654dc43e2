"""The adapter between the daemon and uvicorn: the one module that touches uvicorn's
internals. It serves the TCP listener (and the unix socket when `server.unix_front` is
uvicorn; `thread_front.py` serves it otherwise, with the same behaviours and answers). Its
HTTP connection protocol is uvicorn's httptools protocol, plus what uvicorn does not do
itself; `start`, `stop_accepting` and `shut` drive a server's life cycle by hand (the
listeners hand it bound sockets and share one loop).

- A header deadline: uvicorn times out only idle kept-alive connections, so a client that
  connects and sends nothing (or one byte every few seconds) would be held forever. Here
  a request's headers must be complete `header_timeout_s` after the connection opened (or
  the previous answer was sent), and its body `body_timeout_s` after the headers.
- A header size cap (`max_header_bytes`, answered 431): httptools has none.
- Per-listener connection bounds: the book (`connections.ConnectionBook`) is told of each
  connection as it opens, authenticates, starts and finishes a request, and closes.
- `keepalive_max_requests` requests per connection.
- A request whose body has fully arrived is answered even if the client closed its side
  right after sending it; and a body refused before it was read (413) is read and dropped
  before the connection closes, so the client sees the answer instead of a reset.
- After an answer it closes on while the client may still be sending (431 for headers over
  the cap, 400 for bytes that are not HTTP), the connection closes lingeringly: shut for
  writing, then what still arrives is read and dropped until the client closes, for at
  most `LINGER_S` and `DISCARD_CAP` bytes. Closed at once, the socket would be reset with
  the client's bytes unread, and on TCP the reset reaches the client before the answer.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from typing import Any, ClassVar

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from cloudrunner import logs
from cloudrunner.daemon.app import token_matches
from cloudrunner.daemon.connections import ConnectionBook
from cloudrunner.daemon.http_requests import (
    BAD_REQUEST,
    DISCARD_CAP,
    HEADERS_BODY,
    HEADERS_STATUS,
    HEADERS_TOO_LARGE,
    LINGER_S,
)

#: the uvicorn releases this module was written for (pyproject.toml pins the same range).
#: It reaches past uvicorn's public API: GuardedProtocol overrides HttpToolsProtocol's
#: parser callbacks and reads or swaps its `app`, `cycle` and `transport`; `start` and
#: `shut` drive `Server.startup`/`shutdown` and `Config.load` by hand. The unit test
#: of this contract fails, naming what moved, on a release outside the range or one whose
#: internals changed, before any end-to-end test could.
UVICORN_WRITTEN_FOR = ("0.30", "0.60")

log = logs.get_logger("cloudrunner.server")


async def _headers_too_large(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": HEADERS_STATUS, "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(HEADERS_BODY)).encode()),
        (b"connection", b"close")]})  # fmt: skip
    await send({"type": "http.response.body", "body": HEADERS_BODY})


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with deadlines, size caps and connection bounds."""

    book: ClassVar[ConnectionBook]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._in_headers = True
        self._head_bytes = 0
        self._head_size = 0
        self._message_done = False
        self._close_when_done = False
        self._answering: deque[tuple[RequestResponseCycle, bool]] = deque()
        self._discarded = 0
        self._requests = 0
        self._admitted = False
        self._lingering = False

    # -- connection ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.book.admit(self):
            self.close("refused: every connection of this listener is busy")
            return
        self._admitted = True
        self._arm(self.book.limits.header_timeout_s, "the request headers did not arrive in time")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.book.forget(self)
        super().connection_lost(exc)

    def eof_received(self) -> bool | None:  # type: ignore[override]
        if self._lingering:  # the client has read the answer and closed: so do we
            self.close("answered, then lingered until the client closed")
            return None
        # the client closed its side: answer a request that has fully arrived, drop the rest
        if self.cycle is not None and not self.cycle.response_complete and self._message_done:
            self.cycle.keep_alive = False
            self._close_when_done = False
            return True
        return None

    def close(self, reason: str) -> None:
        if logs.debugging():
            log.debug("server.connection_closed", reason=reason, client=self.client)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def _linger(self, answer: bytes, reason: str) -> None:
        """Send `answer`, which the connection closes on while the client may still be
        sending, then close lingeringly (this module's docstring says why)."""
        if self.transport.is_closing() or self._lingering:
            return  # closing already, or answered already (nothing is written after the end)
        self.transport.write(answer)
        if not self.transport.can_write_eof():
            self.close(reason)
            return
        self.transport.write_eof()  # the client reads the answer, then the end
        self._lingering = True
        self._discarded = 0
        self._arm(LINGER_S, reason)

    def send_400_response(self, msg: str) -> None:
        # uvicorn's answer to bytes that are not HTTP (the same bytes), closed lingeringly
        # where uvicorn closes at once
        self._linger(BAD_REQUEST, f"not HTTP: {msg}")

    # -- deadlines -----------------------------------------------------------------

    def _arm(self, seconds: float, reason: str) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self.close, reason)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    # -- parsing -------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._lingering:  # after an answer the connection closes on: read and dropped
            self._discarded += len(data)
            if self._discarded > DISCARD_CAP:
                self.close("over the discard cap while lingering")
            return
        if self._in_headers:
            self._head_bytes += len(data)
        super().data_received(data)  # bytes that are not HTTP: answered 400, lingering
        if (
            not self._lingering
            and self._in_headers
            and self._head_bytes > self.book.limits.max_header_bytes
            and not self.transport.is_closing()
        ):
            self._linger(HEADERS_TOO_LARGE, "headers over server.max_header_bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._message_done = False
        self._head_size = 0

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._head_size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._head_size += len(name) + len(value) + 4

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._requests += 1
        book = self.book
        unauthorized = False
        if book.token is not None:
            authorization = next((v for k, v in self.headers if k == b"authorization"), None)
            if token_matches(authorization, book.token):
                if not book.authenticated(self):
                    self.close("refused: every authenticated connection of this listener is busy")
                    return
            else:
                unauthorized = True  # the app answers 401; the connection then closes
        if self._head_size > book.limits.max_header_bytes:
            app, self.app = self.app, _headers_too_large
            try:
                super().on_headers_complete()
            finally:
                self.app = app
        else:
            super().on_headers_complete()
        cycle = self.cycle
        if cycle is None or self.transport.is_closing():
            return
        book.started(self)
        if unauthorized or self._requests >= book.limits.keepalive_max_requests:
            cycle.keep_alive = False
        close = not cycle.keep_alive
        if close and any(k == b"content-length" and v.strip() not in (b"", b"0")
                         for k, v in self.headers):  # fmt: skip
            # close only when the body has fully arrived (one refused unread is dropped), so
            # the client reads the answer instead of a reset
            cycle.keep_alive = True
        else:
            close = False  # uvicorn says Connection: close and closes after the answer
        self._answering.append((cycle, close))
        self._close_when_done = close
        self._arm(book.limits.body_timeout_s, "the request body did not arrive in time")

    def on_body(self, body: bytes) -> None:
        if self.cycle is not None and self.cycle.response_complete:
            self._discarded += len(body)
            if self._discarded > DISCARD_CAP:
                self.close("a refused body over the discard cap")
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._message_done = True
        self._disarm()
        if (
            self._close_when_done
            and self.cycle is not None
            and self.cycle.response_complete
            and not self._answering
        ):
            self.close("answered")

    def on_response_complete(self) -> None:
        done, close = self._answering.popleft() if self._answering else (None, False)
        super().on_response_complete()
        self.book.finished(self)
        if self.transport.is_closing():
            return
        if close:
            if done is not self.cycle or self._message_done:
                self.close("answered")
            return
        if self._answering:  # a pipelined request is being answered
            return
        self._in_headers = True
        self._head_bytes = 0
        self._discarded = 0
        self._arm(self.book.limits.header_timeout_s, "the next request did not arrive in time")


def protocol_for(book: ConnectionBook) -> type[GuardedProtocol]:
    """A protocol class bound to one listener's connection book."""
    return type("GuardedProtocol", (GuardedProtocol,), {"book": book})


async def start(config: uvicorn.Config, sock: socket.socket) -> uvicorn.Server:
    """A uvicorn server for `config` serving on a bound, listening socket, started on the
    running loop (uvicorn's own `serve` would run its own loop and signal handlers)."""
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock])
    return server


def stop_accepting(server: uvicorn.Server) -> None:
    for srv in server.servers:
        srv.close()


async def shut(server: uvicorn.Server) -> None:
    """Close every connection (answers already written stay written)."""
    await server.shutdown()
