from __future__ import annotations

from cloudrunner.sandbox.docker_stream import STDERR, STDOUT, StreamDemux, frame_chunk


def test_chunks_split_into_their_streams_whatever_the_arrival() -> None:
    wire = frame_chunk(STDOUT, b"out-1") + frame_chunk(STDERR, b"err") + frame_chunk(STDOUT, b"2")
    demux = StreamDemux()
    got: list[tuple[int, bytes]] = []
    for i in range(len(wire)):
        got.extend(demux.feed(wire[i : i + 1]))
    assert got == [(STDOUT, b"out-1"), (STDERR, b"err"), (STDOUT, b"2")]


def test_an_incomplete_chunk_is_held() -> None:
    demux = StreamDemux()
    assert demux.feed(frame_chunk(STDOUT, b"abcdef")[:-2]) == []
    assert demux.feed(b"ef") == [(STDOUT, b"abcdef")]
