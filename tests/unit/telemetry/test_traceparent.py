"""The W3C traceparent header as the daemon reads it: a valid one gives the remote parent,
anything else one line saying why (never the value), whatever the client sends."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.telemetry.traceparent import MAX_LENGTH, Parent, parse

VALID = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_valid_header_names_its_parent() -> None:
    assert parse(VALID) == Parent(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, True)
    assert parse(VALID[:-2] + "00") == Parent(
        0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, False
    )
    assert parse(f" {VALID}\t") is not None and isinstance(parse(f" {VALID}\t"), Parent)


def test_a_later_version_may_carry_more_fields() -> None:
    assert isinstance(parse("01" + VALID[2:] + "-what-comes-next"), Parent)


def test_no_header_is_no_parent() -> None:
    assert parse(None) is None


@pytest.mark.parametrize(
    "value",
    [
        "",
        "garbage",
        "ff" + VALID[2:],  # version ff is invalid
        VALID.upper(),  # hex is lowercase
        VALID + "-extra",  # version 00 has four fields
        "00-" + "0" * 32 + "-b7ad6b7169203331-01",  # all-zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-" + "0" * 16 + "-01",  # all-zero parent
        "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",  # short trace id
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
        VALID.replace("-", "_"),
        VALID + "\r\nx-injected: 1",
        "00-" + "a" * 10_000,
    ],
)
def test_a_malformed_header_is_refused_with_a_reason(value: str) -> None:
    reason = parse(value)
    assert isinstance(reason, str) and "traceparent" in reason
    assert value.strip() == "" or value not in reason


@given(st.text(max_size=MAX_LENGTH * 2))
def test_any_text_gives_a_parent_or_a_reason_never_an_error(value: str) -> None:
    result = parse(value)
    assert isinstance(result, Parent | str)
    if isinstance(result, str):
        assert len(result) < 120


@given(st.integers(1, 2**128 - 1), st.integers(1, 2**64 - 1), st.booleans())
def test_every_valid_header_reads_back(trace_id: int, span_id: int, sampled: bool) -> None:
    value = f"00-{trace_id:032x}-{span_id:016x}-{'01' if sampled else '00'}"
    assert parse(value) == Parent(trace_id, span_id, sampled)
