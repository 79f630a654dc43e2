"""Reading audit logs for people and tools: rotated sets, gzip, several logs, torn lines.

    for entry in read_logs([Path("audit.log")], warn=print):
        entry.record["kind"], entry.file, entry.line

One argument names a *set*: the live file and its rotated files (`FILE.1`, `FILE.2`, ...,
each possibly gzip-compressed as `FILE.N.gz`), read oldest first. A file is gzip when it
starts with the gzip magic bytes, whatever its name. Several sets (logs of several workers)
are merged by record time. Reading streams: one line at a time, nothing is kept.

A line that is not a record (a torn write, acknowledged by a later `torn_record` or not yet)
is skipped and reported through `warn`; the unterminated last line of a live file is called
what it most likely is, a crash mid-write. `audit verify` is the command that judges a log;
readers only report what they skip.
"""

from __future__ import annotations

import gzip
import heapq
import json
import json.scanner
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple, cast

import orjson

from cloudrunner.audit.failures import AuditLogError
from cloudrunner.audit.records import AnyRecord

Warn = Callable[[str], None]

_GZIP_MAGIC = b"\x1f\x8b"


class Entry(NamedTuple):
    """One record and where it was read (a tuple: millions are made per query)."""

    file: str
    line: int
    #: the line as written, without its newline
    raw: bytes
    #: typed as the envelope and the fields shared by kinds; `records.view` gives a kind's own
    record: AnyRecord


def rotated_members(path: Path) -> dict[int, Path]:
    """The rotated files of `path` by number: `path.N` or `path.N.gz`.

    Raises AuditLogError when both forms of one number exist (which one is the chain?).
    """
    pattern = re.compile(re.escape(path.name) + r"\.([1-9][0-9]*)(\.gz)?")
    found: dict[int, Path] = {}
    try:
        names = sorted(entry.name for entry in path.parent.iterdir())
    except OSError:
        return found
    for name in names:
        match = pattern.fullmatch(name)
        if match is None:
            continue
        number = int(match.group(1))
        if number in found:
            raise AuditLogError(
                f"both {found[number]} and {path.parent / name} exist: keep one of them "
                "(the compressed or the plain copy of the same rotated file)"
            )
        found[number] = path.parent / name
    return found


def log_set(path: Path) -> list[Path]:
    """The set `path` names, oldest first: its rotated files, then `path` itself.

    A rotated member given by itself (`audit.log.3.gz`) is just that file.
    """
    members = rotated_members(path)
    return [members[n] for n in sorted(members, reverse=True)] + [path]


def check_readable(path: Path) -> None:
    if path.is_dir():
        raise AuditLogError(f"{path} is a directory, not an audit log; pass the log file")
    if not path.exists():
        raise AuditLogError(f"audit log {path} does not exist; check the path (--audit-log)")


def open_log(path: Path) -> IO[bytes]:
    """`path` opened for reading, decompressed when it is gzip."""
    try:
        handle: IO[bytes] = path.open("rb")
        magic = handle.read(2)
        handle.seek(0)
    except OSError as exc:
        raise AuditLogError(
            f"cannot read audit log {path}: {exc.strerror or exc}; "
            "check the path and its permissions"
        ) from exc
    if magic == _GZIP_MAGIC:
        # closing it leaves `handle` open: raw_lines closes both
        return cast(IO[bytes], gzip.GzipFile(fileobj=handle, mode="rb"))
    return handle


def _lines(path: Path) -> Iterator[bytes]:
    """The lines of one file as read, newline included (the file's own iterator: one
    generator step per line, nothing else, because `stats` reads a million of them)."""
    handle = open_log(path)
    try:
        yield from handle
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise AuditLogError(
            f"cannot read audit log {path}: {exc}; a compressed file that is cut short or "
            "damaged cannot be read past the damage"
        ) from exc
    finally:
        handle.close()
        inner = getattr(handle, "fileobj", None)
        if inner is not None:
            inner.close()


def raw_lines(path: Path) -> Iterator[tuple[int, int, bytes, bool]]:
    """(line number, byte offset, line without newline, terminated) of one file."""
    offset = 0
    for number, raw in enumerate(_lines(path), start=1):
        terminated = raw.endswith(b"\n")
        yield number, offset, raw[:-1] if terminated else raw, terminated
        offset += len(raw)


# The C scanner behind json.loads, called directly: records are ASCII (canonical JSON), and
# skipping json.loads' encoding detection and wrapper is a third of the parse time.
_scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]
)


def _parse_stdlib(data: bytes) -> Any:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return json.loads(data)
    value, end = _scan(text, 0)
    if end != len(text):
        raise ValueError("extra data after the JSON value")
    return value


def _parse(data: bytes) -> Any:
    """The JSON value of a line. orjson first (2.5x the standard library's speed, which is
    most of what `audit query` and `stats` cost); what orjson refuses but Python's json
    accepts (a lone surrogate escape, NaN, a number out of double range) goes to the
    standard library. One difference stays: orjson reads an integer beyond 64 bits as a
    float. That changes no filter, count or duration and no output that copies the line
    (JSON lines, export); a reader that must have every value exact asks for `exact`."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return _parse_stdlib(data)


def as_record(data: bytes, *, exact: bool = False) -> AnyRecord | None:
    """The record on a line, or None: a cheap shape check of its `seq`, `kind` and `hash`
    (verify checks the chain, `prev_hash` included). `exact`: parsed by the standard library
    alone (see `_parse`)."""
    if not data.startswith(b'{"'):
        return None
    value: Any
    try:
        value = _parse_stdlib(data) if exact else _parse(data)
    except (ValueError, StopIteration):
        return None
    if type(value) is not dict:
        return None
    seq = value.get("seq")
    if type(seq) is float:
        # orjson reads an integer beyond 64 bits as a float: read the line exactly
        try:
            value = _parse_stdlib(data)
        except (ValueError, StopIteration):
            return None
        seq = value.get("seq")
    hash_ = value.get("hash")
    if type(seq) is not int or type(hash_) is not str or len(hash_) != 64:
        return None
    if type(value.get("kind")) is not str:
        return None
    return cast(AnyRecord, value)


def not_a_log(name: str, why: str) -> AuditLogError:
    return AuditLogError(
        f"{name} is not a cloudrunner audit log: {why} (each line should be a JSON object "
        "with seq, kind, prev_hash and hash)"
    )


def skip_message(name: str, number: int, data: bytes, *, last: bool, terminated: bool) -> str:
    """The warning for a line that is not a record: a crash mid-write when it is the live
    file's unterminated last line, else a torn write."""
    if last and not terminated:
        return (
            f"{name}:{number}: the last record is truncated ({len(data)} bytes): most likely "
            "a writer crashed mid-write; skipped (`cloudrunner audit verify` judges the log)"
        )
    return (
        f"{name}:{number}: {len(data)} bytes that are not an audit record (a torn write); skipped"
    )


def read_file(
    path: Path,
    warn: Warn,
    *,
    accept: Callable[[bytes], bool] | None = None,
    is_live: bool = True,
    exact: bool = False,
) -> Iterator[Entry]:
    """The records of one file. `accept(raw)` may reject a line before it is parsed (a
    cheap byte-level pre-filter); a rejected line is neither parsed nor reported."""
    name = str(path)
    seen_record = False
    pending: tuple[int, bytes, bool] | None = None  # an unreadable line, reported once we
    # know whether it was the last one
    for number, raw in enumerate(_lines(path), start=1):
        terminated = raw[-1:] == b"\n"
        data = raw[:-1] if terminated else raw
        if pending is not None:
            warn(skip_message(name, pending[0], pending[1], last=False, terminated=pending[2]))
            pending = None
        if not data:
            continue
        # A line that does not end like a record is always looked at (it may be torn).
        if accept is not None and seen_record and data.endswith(b"}") and not accept(data):
            continue
        record = as_record(data, exact=exact)
        if record is None:
            if not seen_record and not data.startswith(b'{"'):
                raise not_a_log(name, f"line {number} is not an audit record")
            pending = (number, data, terminated)
            continue
        seen_record = True
        if accept is not None and not accept(data):
            continue
        yield Entry(name, number, data, record)
    if pending is not None:
        warn(skip_message(name, pending[0], pending[1], last=is_live, terminated=pending[2]))
        if not seen_record:
            raise not_a_log(name, "it holds no audit record")


def expand(paths: Iterable[Path]) -> list[list[Path]]:
    """Each argument as its set, oldest first; a file already in an earlier set is left out."""
    sets: list[list[Path]] = []
    seen: set[Path] = set()
    for path in paths:
        check_readable(path)
        members = [p for p in log_set(path) if p.resolve() not in seen]
        seen.update(p.resolve() for p in members)
        if members:
            sets.append(members)
    return sets


def read_set(
    files: list[Path],
    warn: Warn,
    *,
    accept: Callable[[bytes], bool] | None = None,
    exact: bool = False,
) -> Iterator[Entry]:
    for path in files:
        yield from read_file(path, warn, accept=accept, is_live=path is files[-1], exact=exact)


def _time(entry: Entry) -> str:
    value = entry.record.get("time")
    return value if isinstance(value, str) else ""


def read_logs(
    paths: Iterable[Path],
    warn: Warn,
    *,
    accept: Callable[[bytes], bool] | None = None,
    exact: bool = False,
) -> Iterator[Entry]:
    """Every record of every set, one set in file order, several merged by `time`."""
    sets = expand(paths)
    streams = [read_set(files, warn, accept=accept, exact=exact) for files in sets]
    if len(streams) == 1:
        return streams[0]
    return heapq.merge(*streams, key=_time)
