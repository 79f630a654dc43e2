from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.sandbox import framing


def test_a_frame_round_trips() -> None:
    data = framing.encode({"op": "run", "id": 3}, b"\x00\xffbody")
    frames = framing.FrameDecoder().feed(data)
    assert frames == [framing.Frame({"op": "run", "id": 3}, b"\x00\xffbody")]


@given(
    bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=5),
    cut=st.integers(min_value=1, max_value=50),
)
def test_frames_survive_any_chunking(bodies: list[bytes], cut: int) -> None:
    stream = b"".join(framing.encode({"id": i}, body) for i, body in enumerate(bodies))
    decoder = framing.FrameDecoder()
    got: list[framing.Frame] = []
    for start in range(0, len(stream), cut):
        got.extend(decoder.feed(stream[start : start + cut]))
    assert [f.body for f in got] == bodies
    assert [f.meta["id"] for f in got] == list(range(len(bodies)))
    assert decoder.pending == 0


def test_an_oversized_body_is_refused_before_it_is_read() -> None:
    decoder = framing.FrameDecoder(max_body=10)
    with pytest.raises(framing.FramingError, match="11 body bytes"):
        decoder.feed(struct.pack("!II", 2, 11))


def test_metadata_must_be_a_json_object() -> None:
    with pytest.raises(framing.FramingError, match="not JSON"):
        framing.FrameDecoder().feed(struct.pack("!II", 3, 0) + b"{x}")
    with pytest.raises(framing.FramingError, match="not a JSON object"):
        framing.FrameDecoder().feed(struct.pack("!II", 2, 0) + b"[]")
