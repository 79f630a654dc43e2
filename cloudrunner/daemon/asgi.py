"""The little of ASGI the app needs: a request's method, path, headers and body, and an
answer sent in two messages.

Written here rather than taken from Starlette, which the app used for exactly this (it
routes by `openapi.OPERATIONS` and renders its own JSON): building Starlette's `Request`
(its URL and header objects) and `Response` for every event was about 60 µs of the
daemon's CPU per event on this 2-core machine, a fifth of what the HTTP front costs under
uvloop (`python -m bench` measures the front alone).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ClientDisconnect(Exception):
    """The client went away before its request's body had arrived."""


class Request:
    """One HTTP request as the ASGI server hands it over."""

    __slots__ = ("_headers", "_receive", "method", "path", "scope")

    def __init__(self, scope: Scope, receive: Receive) -> None:
        self.scope = scope
        self._receive = receive
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self._headers: dict[str, str] | None = None

    def header(self, name: str) -> str | None:
        """The value of header `name` (lower case); the first one when it is repeated."""
        if self._headers is None:
            headers: dict[str, str] = {}
            for key, value in self.scope["headers"]:
                headers.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
            self._headers = headers
        return self._headers.get(name)

    async def body(self) -> bytes:
        """The whole body; ClientDisconnect when the client left before its end."""
        chunks: list[bytes] = []
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(chunks)


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()

    async def send(self, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": self.status,
                "headers": [
                    (b"content-length", str(len(self.body)).encode()),
                    (b"content-type", self.content_type.encode()),
                    *((k.encode("latin-1"), v.encode("latin-1")) for k, v in self.headers),
                ],
            }
        )
        await send({"type": "http.response.body", "body": self.body, "more_body": False})
