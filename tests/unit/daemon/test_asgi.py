"""The app's own ASGI request and response (`cloudrunner.daemon.asgi`), fed the messages an
ASGI server sends; the same code over a real socket is in test_app.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cloudrunner.daemon.asgi import ClientDisconnect, Message, Request, Response


def _request(headers: list[tuple[bytes, bytes]], messages: list[Message]) -> Request:
    queue = list(messages)

    async def receive() -> Message:
        return queue.pop(0)

    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/v1/x", "headers": headers}
    return Request(scope, receive)


def test_headers_are_case_insensitive_and_the_first_of_a_repeated_one_counts() -> None:
    request = _request(
        [(b"Content-Length", b"3"), (b"X-Twice", b"first"), (b"x-twice", b"second")], []
    )
    assert request.header("content-length") == "3"
    assert request.header("x-twice") == "first"
    assert request.header("authorization") is None
    assert (request.method, request.path) == ("POST", "/v1/x")


def test_a_body_in_several_messages_is_joined() -> None:
    request = _request(
        [],
        [
            {"type": "http.request", "body": b"ab", "more_body": True},
            {"type": "http.request", "body": b"", "more_body": True},
            {"type": "http.request", "body": b"c"},
        ],
    )
    assert asyncio.run(request.body()) == b"abc"


def test_a_client_gone_before_the_end_of_its_body_is_a_disconnect() -> None:
    request = _request(
        [],
        [{"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.disconnect"}],
    )
    with pytest.raises(ClientDisconnect):
        asyncio.run(request.body())


def test_a_response_is_sent_with_its_length_type_and_headers() -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    body = '{"permission":"ällow"}\n'.encode()
    asyncio.run(Response(403, body, headers=(("x-cloudrunner-blocked", "true"),)).send(send))
    start, end = sent
    assert start["status"] == 403
    assert start["headers"] == [
        (b"content-length", str(len(body)).encode()),
        (b"content-type", b"application/json"),
        (b"x-cloudrunner-blocked", b"true"),
    ]
    assert end == {"type": "http.response.body", "body": body, "more_body": False}
