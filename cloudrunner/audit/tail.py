"""`cloudrunner audit tail [-f] FILE`: the last records, then (with -f) new ones as they come,
across rotation.

Following keeps the live file open and reads what is appended. When the path names another
file (the writer renamed the live file to FILE.1 and started a new one), it reads the old
file to its end, then every rotated file newer than it (a burst may rotate more than once
between two polls), then the new live file from its start; no record is skipped or read
twice. A line is only taken once its newline is there, so a record being written is never
seen half.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from cloudrunner.audit.filters import RecordFilter, filter_from
from cloudrunner.audit.reader import (
    Entry,
    Warn,
    as_record,
    check_readable,
    log_set,
    not_a_log,
    skip_message,
)
from cloudrunner.errors import ExitCode

_READ = 64 * 1024


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class Follower:
    """Reads what is appended to a live audit log, across rotation."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[bytes] | None = None
        self._id: tuple[int, int] | None = None
        self._name = str(path)
        self._line = 0
        self._partial = b""
        self._open(path)

    def _open(self, path: Path) -> bool:
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            return False
        st = os.fstat(handle.fileno())
        self._handle, self._id, self._name = handle, (st.st_dev, st.st_ino), str(path)
        self._partial, self._line = b"", 0
        return True

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _drain(self) -> Iterator[tuple[str, int, bytes]]:
        """Complete lines appended to the open file since the last call."""
        assert self._handle is not None
        while True:
            chunk = self._handle.read(_READ)
            if not chunk:
                return
            data = self._partial + chunk
            lines = data.split(b"\n")
            self._partial = lines.pop()
            for line in lines:
                self._line += 1
                yield self._name, self._line, line

    def _newer_rotated(self) -> list[Path]:
        """Rotated files written after the one just finished, oldest first."""
        members = log_set(self.path)[:-1]
        ids = [_identity(p) for p in members]
        if self._id in ids:
            return members[ids.index(self._id) + 1 :]
        return []

    def poll(self) -> Iterator[tuple[str, int, bytes]]:
        """Every complete line written since the last poll, in chain order."""
        if self._handle is None and not self._open(self.path):
            return
        yield from self._drain()
        while True:
            current = _identity(self.path)
            if current is None or current == self._id:
                return
            # Rotated: finish this file, then the files rotated after it, then the live one.
            newer = self._newer_rotated()
            last = self._id
            self.close()
            for path in newer:
                if self._open(path):
                    last = self._id
                    yield from self._drain()
                    self.close()
            if not self._open(self.path):
                return
            if self._id == current:
                yield from self._drain()
                return
            # The writer rotated again meanwhile: the file that was live a moment ago is a
            # rotated one now, so go round again from the last file read to its end.
            self.close()
            self._id = last

    def follow(
        self, *, interval: float = 0.25, stop: Callable[[], bool] = lambda: False
    ) -> Iterator[tuple[str, int, bytes]]:
        while not stop():
            yield from self.poll()
            time.sleep(interval)


def add_tail_arguments(parser: argparse.ArgumentParser) -> None:
    from cloudrunner.audit.filters import add_filter_arguments

    parser.add_argument("file", metavar="FILE", type=Path, help="the live audit log")
    parser.add_argument(
        "-n",
        "--lines",
        type=int,
        default=10,
        metavar="N",
        help="first print the last N matching records of the live file",
    )
    parser.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="then print new records as they are written, across rotation; stop with Ctrl-C",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    from cloudrunner.audit.query import add_columns_argument

    add_columns_argument(parser)
    parser.add_argument(
        "--interval",
        type=float,
        default=0.25,
        metavar="SECONDS",
        help="how often -f looks for new records",
    )
    add_filter_arguments(parser)


def _entries(
    lines: Iterator[tuple[str, int, bytes]], chosen: RecordFilter, warn: Warn
) -> Iterator[Entry]:
    for name, number, raw in lines:
        if not raw:
            continue
        record = as_record(raw)
        if record is None:
            if number == 1 and not raw.startswith(b'{"'):
                raise not_a_log(name, "line 1 is not an audit record")
            warn(skip_message(name, number, raw, last=False, terminated=True))
            continue
        if chosen.matches(record):
            yield Entry(name, number, raw, record)


def tail_command(args: argparse.Namespace) -> int:
    from cloudrunner.audit.query import warn_stderr, write_entries

    path: Path = args.file
    check_readable(path)
    chosen = filter_from(args)
    out = sys.stdout
    # One reader for both parts: the last records are what it reads up to now, so nothing
    # falls between them and what follows.
    follower = Follower(path)
    try:
        last: deque[Entry] = deque(maxlen=max(args.lines, 0))
        last.extend(_entries(follower.poll(), chosen, warn_stderr))
        write_entries(last, args.format, out, columns=args.columns)
        out.flush()
        if not args.follow:
            return ExitCode.OK
        for entry in _entries(follower.follow(interval=args.interval), chosen, warn_stderr):
            write_entries([entry], args.format, out, with_header=False, columns=args.columns)
            out.flush()
    finally:
        follower.close()
    return ExitCode.OK
