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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from cloudrunner.audit.filters import (
    RecordFilter,
    add_filter_arguments,
    answer_of,
    decision_label,
)
from cloudrunner.audit.parallel import Task, default_jobs, per_file, work_of
from cloudrunner.audit.reader import Entry, expand, read_file, read_logs
from cloudrunner.audit.records import AnyRecord, RecordKind, view
from cloudrunner.errors import CloudrunnerError, ExitCode

#: (heading, width, right-aligned), in the table's order
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
    ("CONVERSATION", 0, False),
)
COLUMN_NAMES = tuple(heading.lower() for heading, _w, _r in COLUMNS)


def parse_columns(text: str) -> tuple[int, ...]:
    """`--columns seq,kind,...`: the chosen columns' indexes, in the order given."""
    chosen: list[int] = []
    for name in (part.strip().lower() for part in text.split(",")):
        if name not in COLUMN_NAMES:
            raise argparse.ArgumentTypeError(
                f"{name!r} is not a column; choose from {','.join(COLUMN_NAMES)}"
            )
        if COLUMN_NAMES.index(name) in chosen:
            raise argparse.ArgumentTypeError(f"column {name!r} is given twice")
        chosen.append(COLUMN_NAMES.index(name))
    return tuple(chosen)


ALL_COLUMNS = tuple(range(len(COLUMNS)))


def _fit(text: str, width: int, right: bool) -> str:
    if width == 0:
        return text
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.rjust(width) if right else text.ljust(width)


def _row(values: tuple[str, ...], columns: tuple[int, ...]) -> str:
    """The chosen columns of a row; the last one shown is never cut."""
    cells = []
    for position, index in enumerate(columns):
        _heading, width, right = COLUMNS[index]
        last = position == len(columns) - 1
        if last:  # never cut; a number still lines up under its heading
            cells.append(values[index].rjust(width) if right else values[index])
        else:
            cells.append(_fit(values[index], width, right))
    return "  ".join(cells).rstrip()


def header(columns: tuple[int, ...] = ALL_COLUMNS) -> str:
    return _row(tuple(heading for heading, _w, _r in COLUMNS), columns)


def table_row(record: AnyRecord, columns: tuple[int, ...] = ALL_COLUMNS) -> str:
    duration = record.get("duration_ms")
    hook = record.get("command")
    if not isinstance(hook, str):
        fallback = view(record, RecordKind.FALLBACK)
        if fallback is not None:  # what went wrong: the daemon down, or the line invalid
            hook = fallback.get("invalid") or fallback.get("problem")
        else:
            hook = record.get("reason") if record.get("kind") != RecordKind.HOOK else ""
    values = (
        str(record.get("time", "")),
        str(record.get("seq", "")),
        str(record.get("kind", "")),
        str(record.get("event") or ""),
        str(record.get("source") or ""),
        " ".join(str(hook or "").split()),
        str(record.get("outcome") or ""),
        decision_label(answer_of(record)) or "",
        f"{duration:.1f}" if isinstance(duration, int | float) else "",
        str(record.get("conversation_id") or ""),
    )
    return _row(values, columns)


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
    entries: Iterable[Entry],
    fmt: str,
    out: IO[str],
    *,
    with_header: bool = True,
    columns: tuple[int, ...] = ALL_COLUMNS,
) -> int:
    count = 0
    if fmt == "table" and with_header:
        out.write(header(columns) + "\n")
    for entry in entries:
        out.write(_format(entry, fmt, columns))
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
    add_columns_argument(parser)
    parser.add_argument("--limit", type=int, metavar="N", help="stop after N records")
    add_jobs_argument(parser)


def add_columns_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--columns",
        type=parse_columns,
        default=ALL_COLUMNS,
        metavar="LIST",
        help=f"the table's columns, comma-separated, in the order to show them (default: "
        f"all: {','.join(COLUMN_NAMES)})",
    )


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


#: what a file's task hands back, in file order: (False, row) or (True, warning message)
Item = tuple[bool, Any]


def file_rows(
    path: Path,
    is_live: bool,
    *,
    chosen: RecordFilter,
    render: Callable[[Entry], Any],
    limit: int | None = None,
) -> tuple[list[Item], list[str]]:
    """A parallel task (`audit.parallel`): the rendered matching records of one file and the
    warnings among them, in the order a single process would print them; at most `limit`
    rows (no file needs more). The warnings travel among the rows, so the task's own
    warning list stays empty."""
    items: list[Item] = []

    def warn(message: str) -> None:
        items.append((True, message))

    read = read_file(path, warn, accept=chosen.accept(), is_live=is_live)
    for entry in matching(read, chosen, limit):
        items.append((False, render(entry)))
    return items, []


def write_rows(
    sets: list[list[Path]],
    task: Task[list[Item]],
    jobs: int,
    write: Callable[[Any], object],
    limit: int | None = None,
) -> int:
    """Run `task` over every file in `jobs` processes and `write` the rows in file order,
    warnings to stderr where they fell; stops (and ends the pool) at the `limit`-th row.
    Returns the rows written."""
    count = 0
    if limit == 0:
        return count
    with contextlib.closing(per_file(task, work_of(sets), jobs)) as parts:
        for items, _none in parts:
            for is_warning, item in items:
                if is_warning:
                    warn_stderr(item)
                    continue
                write(item)
                count += 1
                if count == limit:
                    return count
    return count


def _format(entry: Entry, fmt: str, columns: tuple[int, ...] = ALL_COLUMNS) -> str:
    """One output line: the record as written (json) or its table row."""
    if fmt == "json":
        return entry.raw.decode("ascii", "replace") + "\n"
    return table_row(entry.record, columns) + "\n"


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
        write_entries(entries, args.format, out, columns=args.columns)
        return ExitCode.OK
    if args.format == "table":
        out.write(header(args.columns) + "\n")
    # One set: its files are read in parallel and printed in file order. With --limit every
    # file stops at the limit, and printing stops at the limit-th row overall (the pool is
    # ended then, so files ahead of it are not read to the end).
    render = functools.partial(_format, fmt=args.format, columns=args.columns)
    task = functools.partial(file_rows, chosen=chosen, render=render, limit=args.limit)
    write_rows(sets, task, args.jobs, out.write, args.limit)
    return ExitCode.OK
