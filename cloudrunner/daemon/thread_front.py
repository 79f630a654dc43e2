"""The unix-socket listener's HTTP front without an event loop: an event is read, handled
and answered by one thread, the one that read its last byte (issue 33).

On the uvicorn front an event crosses threads twice (the loop hands the request to an event
thread, the thread hands the answer back); measured through the compiled client that cost
0.5-1.0 ms per event. Here a small elastic set of threads all wait on one epoll set that
holds the listening socket and every connection, each registered one-shot: the thread
woken for a connection reads what has arrived (without blocking), feeds httptools, and when
a request is complete, handles it where it stands and writes the answer; then it puts the
connection back in the set and waits again (leader/followers). An idle connection, or one
trickling its headers, costs a file descriptor and no thread; threads are started while
every one is busy, up to `server.max_concurrent_events` + `SPARE_THREADS`, and leave after
`idle_s` without work. The events running at once stay bounded by
`server.max_concurrent_events` (`admission.Admission`: an event that waits for a slot is
counted as queued, and waited for by a drain, as on the other front).

The event route runs `answer_event` (the daemon's `handle_event`) in the connection's thread.
Every other route goes through the same `app.App` as the uvicorn front, on the daemon's event
loop, so there is one router and one set of answers; the answers the front gives before a
body is read (404, 405, 411, 413, 400, unknown session, 431) are made by the app's own
functions, and rendered as uvicorn renders them (`http_requests.render`).

Every behaviour of the uvicorn front (`uvicorn_front.py`) holds here: the header deadline
(from the connection's start or the previous answer), the body deadline (from the headers),
the keep-alive timeout, the 431 header cap, the listener's `ConnectionBook`,
`keepalive_max_requests`, a request answered when its body has fully arrived even if the
client then half-closed, and a body refused unread (413) read and dropped up to
`DISCARD_CAP` before the connection closes. The TCP listener (bearer token) stays on uvicorn;
`server.unix_front = "uvicorn"` puts the unix listener back on it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import socket
import threading
import time
from typing import Any

from cloudrunner import logs, telemetry
from cloudrunner.daemon.app import (
    CONTROL_BODY_CAP,
    App,
    content_length,
    error_response,
    event_response,
    internal_error,
    route,
)
from cloudrunner.daemon.asgi import Message, Request, Response
from cloudrunner.daemon.connections import ConnectionBook
from cloudrunner.daemon.core import DEFAULT_SESSION, Daemon
from cloudrunner.daemon.deadlines import Deadlines
from cloudrunner.daemon.http_requests import (
    BAD_REQUEST,
    CONTINUE,
    DISCARD_CAP,
    HEADERS_TOO_LARGE,
    LINGER_S,
    BadRequest,
    Incoming,
    RequestReader,
    render,
)
from cloudrunner.daemon.request_errors import DaemonError
from cloudrunner.refusals import BODIES, ErrorCode, Route

#: threads beyond server.max_concurrent_events (for the other routes and for reading)
SPARE_THREADS = 8
#: bytes read from a connection at a time
READ_SIZE = 65536
#: connections accepted per wake-up of the listening socket
ACCEPT_BATCH = 64
#: how long `shut` waits for the threads to end
SHUT_WAIT_S = 10.0
#: how long a connection answered with an error it closes on (400, 431) is read from, and
#: what it sends dropped, before it is closed (see `ThreadServer._linger`)
_ONESHOT = select.EPOLLIN | select.EPOLLONESHOT
_NEVER = float("inf")

log = logs.get_logger("cloudrunner.server")


def answer_event(
    daemon: Daemon, session: str, event: str, payload: bytes, traceparent: str | None = None
) -> Response:
    """The event route, run in the connection's thread from start to end: counted as
    queued (so a drain waits for it), handled in a slot, answered; one trace's front span
    when tracing is on (`traceparent`: the request's header)."""
    with telemetry.front(traceparent, "event"):
        try:
            daemon.queue_event()
            reply = daemon.handle_event(session, event, payload, queued=True)
        except DaemonError as exc:
            return error_response(exc)
        except Exception as exc:
            return internal_error("POST", f"/v1/events/{event}", exc)
        return event_response(reply)


class _Conn:
    """One connection; `busy` while a thread reads or answers it (only that thread touches
    its reader and deadline then), `doomed` once it must close when that thread lets go."""

    __slots__ = (
        "answered_at", "body_length", "busy", "closed", "deadline", "doomed", "early", "fd",
        "head_bytes", "judged", "lingered", "lingering", "lock", "reader", "reason", "requests",
        "route", "server", "sock", "waiting_next",
    )  # fmt: skip

    def __init__(self, server: ThreadServer, sock: socket.socket) -> None:
        self.server = server
        self.sock = sock
        self.fd = sock.fileno()
        self.lock = threading.Lock()
        self.reader = RequestReader()
        self.busy = False
        self.closed = False
        self.doomed: str | None = None
        self.lingering: str | None = None
        """answered and shut for writing: what arrives is dropped until the client closes"""
        self.lingered = 0
        self.deadline = _NEVER
        self.reason = ""
        self.head_bytes = 0
        self.requests = 0
        self.judged: Incoming | None = None
        self.early = False
        """the judged request was answered before its body (refused)"""
        self.route: tuple[Route, dict[str, str]] | None = None
        self.body_length = 0
        self.answered_at = time.monotonic()
        self.waiting_next = False

    def close(self, reason: str) -> None:
        """Close now, or when the thread answering it lets go (`ConnectionBook` calls this)."""
        with self.lock:
            if self.closed:
                return
            if self.busy:
                self.doomed = self.doomed or reason
                return
            self.shut(reason)
        self.server.forget(self)

    def shut(self, reason: str) -> None:
        """Close the socket (the caller holds `lock` and then tells the book)."""
        self.closed = True
        server = self.server
        with contextlib.suppress(OSError, ValueError):
            server.epoll.unregister(self.fd)
        if server.conns.get(self.fd) is self:
            del server.conns[self.fd]
        self.sock.close()
        server.deadlines.cancel(self)
        if logs.debugging():
            log.debug("server.connection_closed", reason=reason, client="unix")


class ThreadServer:
    """One listener served by threads (see the module's docstring)."""

    def __init__(
        self,
        sock: socket.socket,
        book: ConnectionBook,
        app: App,
        loop: asyncio.AbstractEventLoop,
        *,
        max_threads: int,
        keepalive_timeout_s: float,
        idle_s: float,
        name: str = "cloudrunner-front",
    ) -> None:
        self.sock = sock
        self.book = book
        self.limits = book.limits
        self.app = app
        self.daemon: Daemon = app.daemon
        self.loop = loop
        self.max_threads = max_threads
        self.keepalive_timeout_s = keepalive_timeout_s
        self.idle_s = idle_s
        self.name = name
        self.epoll = select.epoll()
        self.conns: dict[int, _Conn] = {}
        self._listen_fd = sock.fileno()
        self._wake_r, self._wake_w = os.pipe()
        self.epoll.register(self._wake_r, select.EPOLLIN)
        self.epoll.register(self._listen_fd, _ONESHOT)
        self._book_lock = threading.RLock()
        self._accept_lock = threading.Lock()
        self._accepting = True
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self._polling = 0
        self._serial = 0
        self._closing = False
        self.deadlines: Deadlines[_Conn] = Deadlines(self._expired, f"{name}-deadlines")

    @property
    def threads(self) -> int:
        with self._lock:
            return len(self._threads)

    def start(self) -> None:
        with self._lock:
            self._spawn()

    # -- the threads -------------------------------------------------------------------

    def _spawn(self) -> None:
        """Start a thread, counted as polling (the caller holds `_lock`)."""
        self._serial += 1
        thread = threading.Thread(target=self._run, name=f"{self.name}-{self._serial}",
                                  daemon=True)  # fmt: skip
        self._threads.add(thread)
        self._polling += 1
        thread.start()

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            try:
                events = self.epoll.poll(self.idle_s, 1)
            except OSError:  # the set was closed under it
                events, closed = [], True
            else:
                closed = False
            with self._lock:
                if closed or self._closing or (not events and self._polling > 1):
                    self._polling -= 1
                    self._threads.discard(me)
                    return
                if not events:
                    continue
                self._polling -= 1
                if self._polling == 0 and len(self._threads) < self.max_threads:
                    self._spawn()  # someone must be waiting while this thread works
            fd = events[0][0]
            try:
                if fd == self._listen_fd:
                    self._accept()
                else:
                    self._serve(fd)
            except Exception as exc:  # a bug: never let a thread of the front die of it
                log.error("server.front_error", error_type=type(exc).__name__, error=str(exc))
            with self._lock:
                self._polling += 1

    # -- accepting -----------------------------------------------------------------------

    def _accept(self) -> None:
        accepted = self._accept_some()
        if len(accepted) == 1:
            # a client writes its request as soon as it is connected: read it now, in this
            # thread, rather than wait to be woken for it
            self._serve(accepted[0])

    def _accept_some(self) -> list[int]:
        accepted: list[int] = []
        with self._accept_lock:
            if not self._accepting:
                return accepted
            try:
                for _ in range(ACCEPT_BATCH):
                    try:
                        sock, _ = self.sock.accept()
                    except BlockingIOError:
                        break
                    except OSError as exc:  # out of file descriptors, or the peer gave up
                        log.warning("server.accept_failed", error=str(exc))
                        break
                    if self._enter(sock):
                        accepted.append(sock.fileno())
            finally:  # whatever happened, the listener is waited on again
                self.epoll.modify(self._listen_fd, _ONESHOT)
        return accepted

    def _enter(self, sock: socket.socket) -> bool:
        """A new connection into the book, the poll set and the timer: False when it was
        closed at once."""
        sock.setblocking(False)
        conn = _Conn(self, sock)
        with self._book_lock:
            admitted = self.book.admit(conn)
        # Under its lock until it is in both the poll set and the timer: a thread woken
        # for it (which sets the body's deadline once the head is in) and the timer (which
        # closes it) both wait for that, so neither meets it half entered, and the header
        # deadline set here never replaces a later one.
        with conn.lock:
            if not admitted:
                conn.shut("refused: every connection of this listener is busy")
                return False
            self.conns[conn.fd] = conn
            when = time.monotonic() + self.limits.header_timeout_s
            conn.deadline, conn.reason = when, "the request headers did not arrive in time"
            self.deadlines.arm(conn, when)
            try:
                self.epoll.register(conn.fd, _ONESHOT)
            except OSError as exc:
                conn.shut(f"not put in the poll set: {exc}")
                refused = True
            else:
                refused = False
        if refused:
            self.forget(conn)
        return not refused

    def stop_accepting(self) -> None:
        with self._accept_lock:
            if not self._accepting:
                return
            self._accepting = False
            with contextlib.suppress(OSError, ValueError):
                self.epoll.unregister(self._listen_fd)
            self.sock.close()

    # -- one connection ------------------------------------------------------------------

    def _serve(self, fd: int) -> None:
        conn = self.conns.get(fd)
        if conn is None:
            return
        with conn.lock:
            if conn.closed or conn.busy:
                return
            conn.busy = True
        try:
            self._read(conn)
        finally:
            self._let_go(conn)

    def _let_go(self, conn: _Conn) -> None:
        with conn.lock:
            conn.busy = False
            reason = conn.doomed
            if reason is None and self._closing:
                reason = "the daemon is closing"
            if reason is None and conn.deadline <= time.monotonic():
                reason = conn.reason
            if reason is None:
                try:
                    self.epoll.modify(conn.fd, _ONESHOT)
                except (OSError, ValueError):
                    reason = "gone from the poll set"
                else:
                    return
            conn.shut(reason)
        self.forget(conn)

    def forget(self, conn: _Conn) -> None:
        with self._book_lock:
            self.book.forget(conn)

    def _read(self, conn: _Conn) -> None:
        while conn.doomed is None:
            try:
                data = conn.sock.recv(READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                conn.doomed = "reset by the client"
                return
            if not data:
                conn.doomed = conn.lingering or "closed by the client"
                return
            if conn.lingering is not None:
                conn.lingered += len(data)
                if conn.lingered > DISCARD_CAP:
                    conn.doomed = conn.lingering
                    return
            else:
                if conn.waiting_next:  # the next request has begun: its headers' deadline
                    conn.waiting_next = False
                    self._arm(conn, conn.answered_at + self.limits.header_timeout_s,
                              "the next request did not arrive in time")  # fmt: skip
                self._take(conn, data)
            if len(data) < READ_SIZE:
                return

    def _take(self, conn: _Conn, data: bytes) -> None:
        reader = conn.reader
        try:
            reader.feed(data)
        except BadRequest as exc:
            self._linger(conn, BAD_REQUEST, f"not an HTTP request: {exc}")
            return
        if reader.head_pending:
            conn.head_bytes += len(data)
            if conn.head_bytes > self.limits.max_header_bytes:
                self._linger(conn, HEADERS_TOO_LARGE, "headers over server.max_header_bytes")
                return
        else:
            conn.head_bytes = 0
        self._answer(conn)

    def _answer(self, conn: _Conn) -> None:
        """Judge each request whose head is complete, and answer each that is complete."""
        ready = conn.reader.ready
        while ready and conn.doomed is None:
            incoming = ready[0]
            if conn.judged is not incoming:
                self._judge(conn, incoming)
                if conn.doomed is not None or conn.lingering is not None:
                    return
            if not incoming.complete:
                if incoming.discarded > DISCARD_CAP:
                    conn.doomed = "a refused body over the discard cap"
                return
            ready.popleft()
            conn.deadline = _NEVER  # it has fully arrived: no deadline while it is answered
            close = self._closes(conn, incoming)
            if conn.early:  # its answer went before its body, now read and dropped
                if close:
                    conn.doomed = "answered"
                    return
                conn.answered_at = time.monotonic()
            else:
                self._send(conn, self._respond(conn, incoming), close)
                if close:
                    conn.doomed = "answered"
                    return
            if ready:
                continue  # pipelined: the next one is judged (and its deadline set) now
            if conn.reader.head_pending:  # the next one has begun
                self._arm(conn, conn.answered_at + self.limits.header_timeout_s,
                          "the next request did not arrive in time")  # fmt: skip
            else:
                conn.waiting_next = True
                self._arm(conn, conn.answered_at + min(self.keepalive_timeout_s,
                          self.limits.header_timeout_s), "idle after its answer")  # fmt: skip

    def _closes(self, conn: _Conn, incoming: Incoming) -> bool:
        return (
            not incoming.keep_alive
            or conn.requests >= self.limits.keepalive_max_requests
            or self._closing
        )

    def _judge(self, conn: _Conn, incoming: Incoming) -> None:
        """A request's head is complete: refuse it now (its body is then dropped) or wait
        for its body."""
        conn.judged = incoming
        conn.early = False
        conn.requests += 1
        with self._book_lock:
            self.book.started(conn)
        if incoming.head_size > self.limits.max_header_bytes:
            self._linger(conn, HEADERS_TOO_LARGE, "headers over server.max_header_bytes")
            return
        refusal = self._refusal(conn, incoming)
        if refusal is not None:
            conn.early = True
            incoming.discard = True
            incoming.chunks.clear()
            close = self._closes(conn, incoming)
            self._send(conn, refusal, close)
            if not incoming.complete:
                # read to its end and dropped (so a client that closes after it reads the
                # answer, not a reset)
                self._arm(conn, time.monotonic() + self.limits.body_timeout_s,
                          "the refused body did not arrive in time")  # fmt: skip
            return
        if incoming.expect_continue and conn.body_length:
            self._write(conn, CONTINUE)  # when the app would read the body, as uvicorn does
        if not incoming.complete:
            self._arm(conn, time.monotonic() + self.limits.body_timeout_s,
                      "the request body did not arrive in time")  # fmt: skip

    def _refusal(self, conn: _Conn, incoming: Incoming) -> Response | None:
        """The answer to a request refused before its body is read, if it is."""
        request = _request(incoming, b"")
        conn.body_length = 0
        try:
            op, params = route(incoming.method, incoming.path)
            conn.route = (op.name, params)
            if op.name is Route.EVENT:
                session = params.get("session", DEFAULT_SESSION)
                self.daemon.session_info(session)  # an unknown session before the body
                cap = self.daemon.settings.max_payload_bytes
                try:
                    conn.body_length = content_length(request, cap)
                except DaemonError as exc:
                    if exc.code is not ErrorCode.BODY_TOO_LARGE:
                        raise
                    raise self.daemon.refuse_unread(
                        session, params["event"], exc.message, ErrorCode.PAYLOAD_TOO_LARGE
                    ) from None
            elif op.name in BODIES:
                conn.body_length = content_length(request, CONTROL_BODY_CAP)
        except DaemonError as exc:
            return error_response(exc)
        except Exception as exc:
            return internal_error(incoming.method, incoming.path, exc)
        return None

    def _respond(self, conn: _Conn, incoming: Incoming) -> Response:
        assert conn.route is not None
        name, params = conn.route
        if name is Route.EVENT:
            session = params.get("session", DEFAULT_SESSION)
            traceparent = incoming.header(b"traceparent")
            return answer_event(
                self.daemon, session, params["event"], incoming.body(),
                None if traceparent is None else traceparent.decode("latin-1"),
            )  # fmt: skip
        # every other route: the app, on the daemon's loop
        request = _request(incoming, incoming.body())
        try:
            answer = asyncio.run_coroutine_threadsafe(self.app.respond(request), self.loop)
            return answer.result()
        except Exception as exc:  # the loop is gone (the app answers its own errors)
            return internal_error(incoming.method, incoming.path, exc)

    # -- writing -------------------------------------------------------------------------

    def _send(self, conn: _Conn, response: Response, close: bool) -> None:
        self._write(conn, render(response, close))
        conn.answered_at = time.monotonic()
        with self._book_lock:
            self.book.finished(conn)

    def _write(self, conn: _Conn, data: bytes) -> bool:
        """Write all of `data` (waiting while the client's buffer is full, at most the body
        deadline); False, and the connection doomed, when it cannot be written."""
        view = memoryview(data)
        deadline = time.monotonic() + self.limits.body_timeout_s
        poller: select.poll | None = None
        while view:
            try:
                view = view[conn.sock.send(view) :]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    conn.doomed = "the client did not read its answer"
                    return False
                if poller is None:
                    poller = select.poll()
                    poller.register(conn.fd, select.POLLOUT)
                poller.poll(left * 1000)
            except OSError:
                conn.doomed = "the client went away before its answer"
                return False
        return True

    def _linger(self, conn: _Conn, answer: bytes, reason: str) -> None:
        """Answer with an error the connection closes on while the client may still be
        sending (its headers over the cap, bytes that are not HTTP): write the answer, shut
        the connection for writing (the client reads the answer, then the end), and read
        and drop what still arrives until the client closes, for at most `LINGER_S` and
        `DISCARD_CAP` bytes. Closed at once instead, a socket with unread bytes is reset,
        and a reset can reach the client before it has read the answer."""
        if not self._write(conn, answer):
            return
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            conn.doomed = reason
            return
        conn.lingering = reason
        self._arm(conn, time.monotonic() + LINGER_S, reason)

    # -- deadlines -----------------------------------------------------------------------

    def _arm(self, conn: _Conn, when: float, reason: str) -> None:
        conn.deadline = when
        conn.reason = reason
        self.deadlines.arm(conn, when)

    def _expired(self, conn: _Conn, when: float) -> None:
        with conn.lock:
            if conn.closed or conn.busy or conn.deadline != when:
                return  # re-armed since, or a thread holds it (and checks when it lets go)
            conn.shut(conn.reason)
        self.forget(conn)

    # -- life cycle ----------------------------------------------------------------------

    def shut(self) -> None:
        """Close every connection (answers already written stay written; one being answered
        closes after its answer) and end the threads. Blocks."""
        self.stop_accepting()
        with self._lock:
            self._closing = True
            threads = list(self._threads)
        for conn in list(self.conns.values()):
            conn.close("the daemon is closing")
        os.write(self._wake_w, b"x")  # wakes every waiting thread: they see `_closing`
        deadline = time.monotonic() + SHUT_WAIT_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.deadlines.stop()
        self.epoll.close()
        os.close(self._wake_r)
        os.close(self._wake_w)


def _request(incoming: Incoming, body: bytes) -> Request:
    """The app's view of a request whose body (if any) has fully arrived."""
    scope: dict[str, Any] = {
        "type": "http",
        "method": incoming.method,
        "path": incoming.path,
        "query_string": incoming.query,
        "headers": incoming.headers,
    }
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(scope, receive)
