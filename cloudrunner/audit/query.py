"""`cloudrunner audit query`: the records that match, as an aligned table or JSON lines.

The table has fixed column widths (long values are cut with `…`), so it streams: a row is
printed as soon as its record is read, however long the log. JSON lines are the records
exactly as written (canonical JSON, the chain fields included).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from cloudrunner.audit.filters import RecordFilter, add_filter_arguments, decision_label
from cloudrunner.audit.parallel import default_jobs, per_file, work_of
from cloudrunner.audit.reader import Entry, expand, read_file, read_logs
from cloudrunner.errors import CloudrunnerError, ExitCode

#: (heading, width, right-aligned)
COLUMNS: tuple[tuple[str, int, bool], ...] = (
    ("TIME", 27, False),
    ("SEQ", 7, True),
    ("KIND", 11, False),
    ("EVENT", 20, False),
    ("SOURCE", 10, False),
    ("HOOK", 32, False),
    ("OUTCOME", 15, False),
    ("DECISION", 8, False),
    ("MS", 9, True),
    ("CONVERSATION", 0, False),  # the last column is not cut
)


def _fit(text: str, width: int, right: bool) -> str:
    if width == 0:
        return text
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.rjust(width) if right else text.ljust(width)


def _row(values: Iterable[str]) -> str:
    cells = [_fit(v, w, r) for v, (_h, w, r) in zip(values, COLUMNS, strict=True)]
    return "  ".join(cells).rstrip()


def header() -> str:
    return _row(heading for heading, _w, _r in COLUMNS)


def table_row(record: dict[str, Any]) -> str:
    duration = record.get("duration_ms")
    hook = record.get("command")
    if not isinstance(hook, str):
        hook = record.get("reason") if record.get("kind") != "hook" else ""
    return _row(
        (
            str(record.get("time", "")),
            str(record.get("seq", "")),
            str(record.get("kind", "")),
            str(record.get("event") or ""),
            str(record.get("source") or ""),
            " ".join(str(hook or "").split()),
            str(record.get("outcome") or ""),
            decision_label(record.get("decision")) or "",
            f"{duration:.1f}" if isinstance(duration, int | float) else "",
            str(record.get("conversation_id") or ""),
        )
    )


def matching(entries: Iterable[Entry], chosen: RecordFilter, limit: int | None) -> Iterator[Entry]:
    """The entries `chosen` matches, at most `limit`; reading stops at the `limit`-th."""
    if limit == 0:
        return
    count = 0
    for entry in entries:
        if chosen.matches(entry.record):
            yield entry
            count += 1
            if count == limit:
                return


def select(
    paths: list[Path], chosen: RecordFilter, *, warn: Any, limit: int | None = None
) -> Iterator[Entry]:
    """The matching entries of the logs at `paths`, in order, at most `limit` of them."""
    return matching(read_logs(paths, warn, accept=chosen.accept()), chosen, limit)


def write_entries(
    entries: Iterable[Entry], fmt: str, out: IO[str], *, with_header: bool = True
) -> int:
    count = 0
    if fmt == "table" and with_header:
        out.write(header() + "\n")
    for entry in entries:
        if fmt == "json":
            out.write(entry.raw.decode("ascii", "replace") + "\n")
        else:
            out.write(table_row(entry.record) + "\n")
        count += 1
    return count


def warn_stderr(message: str) -> None:
    print(f"cloudrunner: warning: {message}", file=sys.stderr)


def add_log_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        metavar="FILE",
        nargs="+",
        type=Path,
        help="audit logs; each brings its rotated files (FILE.1, FILE.2.gz, ...) with it",
    )
    add_filter_arguments(parser)


def add_query_arguments(parser: argparse.ArgumentParser) -> None:
    add_log_arguments(parser)
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="table (default): aligned columns for people; json: the records as JSON lines",
    )
    parser.add_argument("--limit", type=int, metavar="N", help="stop after N records")
    add_jobs_argument(parser)


def add_jobs_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--jobs",
        type=_processes,
        default=default_jobs(),
        metavar="N",
        help="read the files of a rotated set in N processes (default: the CPUs; 1: none)",
    )


def _processes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes (1 or more)")
    return value


#: what a file's task hands back, in file order: ("row", text) or ("warning", message)
Item = tuple[str, str]


def _query_file(
    path: Path, is_live: bool, *, chosen: RecordFilter, fmt: str, limit: int | None
) -> tuple[list[Item], list[str]]:
    """The rows of one file and the warnings among them, in the order a single process
    would print them; at most `limit` rows (no file needs more). The warnings travel among
    the rows, so the task's own warning list stays empty."""
    items: list[Item] = []

    def warn(message: str) -> None:
        items.append(("warning", message))

    read = read_file(path, warn, accept=chosen.accept(), is_live=is_live)
    for entry in matching(read, chosen, limit):
        items.append(("row", _format(entry, fmt)))
    return items, []


def _format(entry: Entry, fmt: str) -> str:
    if fmt == "json":
        return entry.raw.decode("ascii", "replace")
    return table_row(entry.record)


def query_command(args: argparse.Namespace) -> int:
    from cloudrunner.audit.filters import filter_from

    if args.limit is not None and args.limit < 0:
        raise CloudrunnerError(f"--limit {args.limit}: give 0 or more records")
    chosen = filter_from(args)
    out = sys.stdout
    sets = expand(args.files)
    if len(sets) > 1 or args.jobs <= 1:
        # several logs merged by time, or asked for one process
        entries = select(args.files, chosen, warn=warn_stderr, limit=args.limit)
        write_entries(entries, args.format, out)
        return ExitCode.OK
    if args.format == "table":
        out.write(header() + "\n")
    # One set: its files are read in parallel and printed in file order. With --limit every
    # file stops at the limit, and printing stops at the limit-th row overall (the pool is
    # ended then, so files ahead of it are not read to the end).
    task = functools.partial(_query_file, chosen=chosen, fmt=args.format, limit=args.limit)
    remaining = args.limit
    if remaining == 0:
        return ExitCode.OK
    with contextlib.closing(per_file(task, work_of(sets), args.jobs)) as parts:
        for items, _warnings in parts:
            for kind, text in items:
                if kind == "warning":
                    warn_stderr(text)
                    continue
                out.write(text + "\n")
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return ExitCode.OK
    return ExitCode.OK
