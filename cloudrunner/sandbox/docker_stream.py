"""Splitting Docker's multiplexed attach stream (no TTY) into stdout and stderr chunks.

Each chunk on the wire is an 8-byte header (stream type, three zero bytes, big-endian
length) and its payload: 1 = stdout, 2 = stderr.
"""

from __future__ import annotations

import struct

STDOUT = 1
STDERR = 2
_HEADER = struct.Struct(">BxxxL")


class StreamDemux:
    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        chunks: list[tuple[int, bytes]] = []
        while len(self._buf) >= _HEADER.size:
            stream, length = _HEADER.unpack_from(self._buf)
            end = _HEADER.size + length
            if len(self._buf) < end:
                break
            chunks.append((stream, bytes(self._buf[_HEADER.size : end])))
            del self._buf[:end]
        return chunks


def frame_chunk(stream: int, payload: bytes) -> bytes:
    """One chunk as Docker sends it (for tests and tools)."""
    return _HEADER.pack(stream, len(payload)) + payload
