"""Reading audit lines: what counts as a record, what may be a torn write, and the tail.

The writer appends one line per `write(2)`, so a writer killed mid-record leaves a strict
prefix of a line: never valid JSON, and always starting like one of our lines (`{"`). The
tail reader walks back from the end over such lines to the last intact record, so the next
writer can acknowledge them and go on from there.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cloudrunner.audit.chain import is_hash, record_hash
from cloudrunner.audit.failures import AuditLogError
from cloudrunner.audit.processors import ChainHead
from cloudrunner.audit.records import AnyRecord, TornSpanFields, any_record

#: A writer killed while acknowledging torn bytes leaves one more torn line; more than this
#: many unreadable lines at the end is not a crash but damage, and the writer stops.
MAX_TORN_LINES = 8

_CHUNK = 64 * 1024


def parse_record(line: bytes) -> AnyRecord | None:
    """The record on `line`, or None when it is not one (not JSON, or lacks chain keys)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    seq = value.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool):
        return None
    if not isinstance(value.get("kind"), str):
        return None
    if not (is_hash(value.get("hash")) and is_hash(value.get("prev_hash"))):
        return None
    return any_record(value)


def may_be_torn(line: bytes) -> bool:
    """Could `line` be the head of one of our lines, cut short?"""
    return len(line) > 0 and line[:2] == b'{"'[: len(line)]


@dataclass(frozen=True)
class TornSpan:
    """Bytes a killed writer left: where they start, how many, and their sha256."""

    offset: int
    length: int
    sha256: str

    @classmethod
    def of(cls, offset: int, data: bytes) -> TornSpan:
        return cls(offset, len(data), hashlib.sha256(data).hexdigest())

    def fields(self) -> TornSpanFields:
        return {"offset": self.offset, "length": self.length, "sha256": self.sha256}


@dataclass(frozen=True)
class LogTail:
    #: the file's size when it was read
    size: int
    #: the last intact record in the file; None when it holds none
    head: ChainHead | None
    #: unreadable lines after `head`, oldest first: to be acknowledged by a torn_record
    torn: tuple[TornSpan, ...]
    #: the file does not end with a newline: the next line must start with one
    unterminated: bool


def lines_backwards(fd: int, size: int) -> Iterator[tuple[int, bytes, bool]]:
    """(offset, line without its newline, terminated) from the last line to the first."""
    if size == 0:
        return
    terminated = os.pread(fd, 1, size - 1) == b"\n"
    cursor = size - 1 if terminated else size
    pending = b""  # the bytes [cursor, end of the current line)
    chunk = _CHUNK
    while True:
        newline = pending.rfind(b"\n")
        if newline >= 0:
            yield cursor + newline + 1, pending[newline + 1 :], terminated
            pending = pending[:newline]
            terminated = True
            continue
        if cursor == 0:
            yield 0, pending, terminated
            return
        # Grow the read size with the line, so a huge torn line costs O(n log n), not O(n^2).
        step = min(max(chunk, len(pending)), cursor)
        cursor -= step
        pending = os.pread(fd, step, cursor) + pending


def read_tail(fd: int, path: Path) -> LogTail:
    """Find the last intact record of the open log `path` and any torn lines after it."""
    size = os.fstat(fd).st_size
    spans: list[TornSpan] = []
    head: ChainHead | None = None
    unterminated = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
    for offset, line, terminated in lines_backwards(fd, size):
        record = parse_record(line)
        # A whole record that lacks only its newline is intact: it is adopted, not torn.
        if record is not None and (terminated or record_hash(record) == record["hash"]):
            head = ChainHead(record["seq"], record["hash"])
            break
        if not may_be_torn(line):
            raise AuditLogError(
                f"{path} is not a cloudrunner audit log or is damaged: the line at byte "
                f"{offset} is not an audit record; check it with `cloudrunner audit verify "
                f"{path}` and move it aside to start a new log"
            )
        spans.append(TornSpan.of(offset, line))
        if len(spans) > MAX_TORN_LINES:
            raise AuditLogError(
                f"{path} ends with more than {MAX_TORN_LINES} unreadable lines (from byte "
                f"{offset}): that is damage, not an interrupted write; check it with "
                f"`cloudrunner audit verify {path}` and move it aside to start a new log"
            )
    spans.reverse()
    return LogTail(size=size, head=head, torn=tuple(spans), unterminated=unterminated)
