"""The W3C Trace Context `traceparent` header (https://www.w3.org/TR/trace-context/#traceparent-header):
`VERSION-TRACEID-PARENTID-FLAGS` in lowercase hex, read as the specification says a receiver
reads it. A value that is not one is ignored (the event's trace starts afresh) and the reason
is kept, so the front span can say why; the value itself is never kept."""

from __future__ import annotations

from typing import NamedTuple

_HEX = frozenset("0123456789abcdef")
#: the longest value looked at; version 00 is exactly 55 characters
MAX_LENGTH = 512


class Parent(NamedTuple):
    trace_id: int
    span_id: int
    sampled: bool


def _hex(text: str, width: int) -> bool:
    return len(text) == width and _HEX.issuperset(text)


def parse(value: str | None) -> Parent | str | None:
    """The remote parent a `traceparent` names; None when there is no header; else one line
    saying why the value is refused (it never quotes the value)."""
    if value is None:
        return None
    value = value.strip(" \t")
    if not value:
        return "the traceparent header is empty"
    if len(value) > MAX_LENGTH:
        return f"the traceparent header is over {MAX_LENGTH} characters"
    parts = value.split("-")
    if len(parts) < 4:
        return "the traceparent header is not VERSION-TRACEID-PARENTID-FLAGS"
    version, trace_id, span_id, flags = parts[:4]
    if not _hex(version, 2) or version == "ff":
        return "the traceparent version is not two lowercase hex digits (ff is invalid)"
    # version 00 has exactly four fields; a later version may append fields after a dash
    if version == "00" and (len(parts) != 4 or len(value) != 55):
        return "a version 00 traceparent has exactly four fields (55 characters)"
    if not _hex(trace_id, 32) or trace_id == "0" * 32:
        return "the traceparent trace-id is not 32 lowercase hex digits, not all zero"
    if not _hex(span_id, 16) or span_id == "0" * 16:
        return "the traceparent parent-id is not 16 lowercase hex digits, not all zero"
    if not _hex(flags, 2):
        return "the traceparent trace-flags are not two lowercase hex digits"
    return Parent(int(trace_id, 16), int(span_id, 16), bool(int(flags, 16) & 1))
