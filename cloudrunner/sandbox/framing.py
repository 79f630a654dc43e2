"""The framed protocol between the host and the in-container agent (stdlib only).

The agent imports this module too, so it must stay standard-library only and run on the
image's python3 (3.7 or newer). One frame is:

    4 bytes  meta length, big-endian
    4 bytes  body length, big-endian
    meta     a JSON object, UTF-8 (the request or result fields)
    body     raw bytes (a request's stdin; a result's stdout followed by its stderr)

Length-prefixed binary frames keep hook output byte-exact (no escaping) and let either
side refuse an oversized frame before reading it.
"""

from __future__ import annotations

import json
import struct
from typing import Any, NamedTuple

PROTOCOL_VERSION = 1
_HEADER = struct.Struct("!II")
HEADER_SIZE = _HEADER.size
MAX_META = 1 << 20
DEFAULT_MAX_BODY = 256 << 20

#: request ops (host -> agent)
OP_RUN = "run"
#: reply ops (agent -> host)
OP_HELLO = "hello"
OP_RESULT = "result"

#: the agent's environment names its channel's unix socket (in the container) and the
#: token it presents in its hello there; without them the channel is stdin/stdout
CHANNEL_SOCKET_ENV = "CLOUDRUNNER_AGENT_SOCKET"
CHANNEL_TOKEN_ENV = "CLOUDRUNNER_AGENT_TOKEN"


class FramingError(ValueError):
    """The byte stream is not a valid frame sequence: the peer is broken or hostile."""


class Frame(NamedTuple):
    meta: dict[str, Any]
    body: bytes


def encode(meta: dict[str, Any], body: bytes = b"") -> bytes:
    raw = json.dumps(meta, separators=(",", ":")).encode("utf-8")
    if len(raw) > MAX_META:
        raise FramingError(f"frame metadata is over {MAX_META} bytes")
    return _HEADER.pack(len(raw), len(body)) + raw + body


class FrameDecoder:
    """Incremental decoder: feed it bytes as they arrive, get whole frames back."""

    def __init__(self, max_body: int = DEFAULT_MAX_BODY) -> None:
        self._buf = bytearray()
        self._max_body = max_body
        self._want: tuple[int, int] | None = None

    @property
    def pending(self) -> int:
        """Bytes held for a frame not complete yet."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        frames: list[Frame] = []
        while True:
            if self._want is None:
                if len(self._buf) < HEADER_SIZE:
                    return frames
                meta_len, body_len = _HEADER.unpack_from(self._buf)
                if meta_len > MAX_META or body_len > self._max_body:
                    raise FramingError(
                        f"frame announces {meta_len} metadata and {body_len} body bytes "
                        f"(limits {MAX_META} and {self._max_body})"
                    )
                self._want = (meta_len, body_len)
            meta_len, body_len = self._want
            total = HEADER_SIZE + meta_len + body_len
            if len(self._buf) < total:
                return frames
            raw_meta = bytes(self._buf[HEADER_SIZE : HEADER_SIZE + meta_len])
            body = bytes(self._buf[HEADER_SIZE + meta_len : total])
            del self._buf[:total]
            self._want = None
            try:
                meta = json.loads(raw_meta.decode("utf-8"))
            except ValueError as exc:
                raise FramingError(f"frame metadata is not JSON: {exc}") from exc
            if not isinstance(meta, dict):
                raise FramingError("frame metadata is not a JSON object")
            frames.append(Frame(meta, body))
