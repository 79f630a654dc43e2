"""HTTP/1.1 requests read from bytes as they arrive, and answers written as bytes, for the
threaded front (`thread_front.py`). The parsing is httptools' (llhttp, in C), the parser
uvicorn uses; what is here is the bookkeeping around it: each request's head, its size,
its body, and whether it has fully arrived.

Answers are rendered exactly as uvicorn renders the app's (`asgi.Response`) on the other
front: the status line, `content-length`, `content-type`, the app's headers in lower case,
`connection: close` when the connection closes after it; no `server` or `date` header.
"""

from __future__ import annotations

import http
import json
import urllib.parse
from collections import deque
from dataclasses import dataclass, field

import httptools

from cloudrunner import refusals
from cloudrunner.daemon.asgi import Response
from cloudrunner.refusals import ErrorCode

#: how much of a body refused for its size is read and dropped before the connection closes
DISCARD_CAP = 64 * 1024 * 1024
#: how long a front keeps reading (and dropping) what a client still sends after an answer
#: it closes on (400, 431): closed at once, a socket with unread bytes is reset, and the
#: reset can reach the client before it has read the answer
LINGER_S = 2.0


class BadRequest(Exception):
    """The bytes are not an HTTP/1.1 request."""


@dataclass
class Incoming:
    """One request as it arrives: its head once complete, then its body."""

    url: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    head_size: int = 0
    """the request line's target and the headers, in bytes (as uvicorn's front counts them)"""
    method: str = ""
    path: str = ""
    query: bytes = b""
    http_version: str = "1.1"
    keep_alive: bool = True
    expect_continue: bool = False
    head_done: bool = False
    complete: bool = False
    discard: bool = False
    """the body is read and dropped (the request was refused before its body)"""
    discarded: int = 0
    chunks: list[bytes] = field(default_factory=list)

    def header(self, name: bytes) -> bytes | None:
        """The first value of header `name` (lower case)."""
        return next((value for key, value in self.headers if key == name), None)

    def body(self) -> bytes:
        return b"".join(self.chunks)


class RequestReader:
    """Feeds bytes to httptools; the requests whose heads are complete wait in `ready`, in
    order, each growing its body until `complete`."""

    def __init__(self) -> None:
        self._parser = httptools.HttpRequestParser(self)
        self._current: Incoming | None = None
        self.ready: deque[Incoming] = deque()
        self.upgraded = False
        """the client asked for a protocol upgrade: nothing after its head is parsed"""

    @property
    def head_pending(self) -> bool:
        """A request has begun whose head is not complete."""
        return self._current is not None and not self._current.head_done

    def feed(self, data: bytes) -> None:
        """Parse `data`; BadRequest when it is not HTTP."""
        if self.upgraded:
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.upgraded = True
            if self._current is not None and self._current.head_done:
                self._current.keep_alive = False
                self._current.complete = True
        except httptools.HttpParserError as exc:
            raise BadRequest(str(exc)) from None

    # -- httptools callbacks ---------------------------------------------------------

    def on_message_begin(self) -> None:
        self._current = Incoming()

    def on_url(self, url: bytes) -> None:
        assert self._current is not None
        self._current.url += url
        self._current.head_size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        current = self._current
        assert current is not None
        current.head_size += len(name) + len(value) + 4
        name = name.lower()
        value = value.rstrip(b" \t")  # llhttp keeps trailing whitespace
        if name == b"expect" and value.lower() == b"100-continue":
            current.expect_continue = True
        current.headers.append((name, value))

    def on_headers_complete(self) -> None:
        current = self._current
        assert current is not None
        current.method = self._parser.get_method().decode("ascii")
        current.http_version = self._parser.get_http_version()
        current.keep_alive = current.http_version != "1.0" and self._parser.should_keep_alive()
        url = httptools.parse_url(current.url)
        path = url.path.decode("ascii")
        current.path = urllib.parse.unquote(path) if "%" in path else path
        current.query = url.query or b""
        current.head_done = True
        self.ready.append(current)

    def on_body(self, body: bytes) -> None:
        current = self._current
        assert current is not None
        if current.discard:
            current.discarded += len(body)
        else:
            current.chunks.append(body)

    def on_message_complete(self) -> None:
        assert self._current is not None
        self._current.complete = True
        self._current = None


# -- answers ----------------------------------------------------------------------------


def status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return f"HTTP/1.1 {status} {phrase}\r\n".encode()


def render(response: Response, close: bool) -> bytes:
    """The bytes of `response`, as uvicorn writes an `asgi.Response`."""
    head = [
        status_line(response.status),
        b"content-length: %d\r\n" % len(response.body),
        b"content-type: " + response.content_type.encode("latin-1") + b"\r\n",
    ]
    for name, value in response.headers:
        head.append(name.lower().encode("latin-1") + b": " + value.encode("latin-1") + b"\r\n")
    if close:
        head.append(b"connection: close\r\n")
    head.append(b"\r\n")
    return b"".join(head) + response.body


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

_BAD_REQUEST = b"Invalid HTTP request received."
#: what uvicorn answers to bytes that are not HTTP (before closing the connection)
BAD_REQUEST = (
    status_line(400)
    + b"content-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\nconnection: close\r\n"
    b"\r\n" % len(_BAD_REQUEST) + _BAD_REQUEST
)

HEADERS_CODE = ErrorCode.HEADERS_TOO_LARGE
HEADERS_STATUS = refusals.STATUS[HEADERS_CODE]
HEADERS_MESSAGE = (
    "the request line and headers are over the cap (server.max_header_bytes); send less"
)
HEADERS_BODY = (
    json.dumps({"error": {"code": HEADERS_CODE, "message": HEADERS_MESSAGE}}) + "\n"
).encode()
#: the front's one answer of its own (both fronts send these bytes, then close)
HEADERS_TOO_LARGE = (
    status_line(HEADERS_STATUS)
    + b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
    % len(HEADERS_BODY)
    + HEADERS_BODY
)
