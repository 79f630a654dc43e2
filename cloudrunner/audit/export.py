"""`cloudrunner audit export`: one JSON lines stream for a log pipeline (Loki, Elasticsearch,
Splunk), from any number of logs, rotated and compressed files included.

Each output line is the record as written, every field kept (the chain's `seq`,
`prev_hash` and `hash` included), plus three fields a pipeline wants:

    @timestamp   the record's `time` (what Elasticsearch and most shippers index on)
    audit_file   the file the record was read from
    audit_line   its line number there

To re-check a record's hash downstream, drop those three keys and hash the canonical JSON
of the rest (README.md, "The audit log"). Lines that are not records (torn writes) are
skipped with a warning on stderr.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from cloudrunner.audit.failures import AuditLogError
from cloudrunner.audit.filters import RecordFilter
from cloudrunner.audit.reader import Entry, expand
from cloudrunner.errors import ExitCode

EXPORT_KEYS = ("@timestamp", "audit_file", "audit_line")


def export_line(entry: Entry) -> bytes:
    """The record's own bytes with the export fields spliced in before its closing brace."""
    moment = entry.record.get("time")
    extra = (
        f',"@timestamp":{json.dumps(moment if isinstance(moment, str) else None)}'
        f',"audit_file":{json.dumps(entry.file)},"audit_line":{entry.line}'
    )
    return entry.raw[:-1] + extra.encode("ascii") + b"}\n"


def write_export(entries: Iterable[Entry], out: IO[bytes]) -> int:
    count = 0
    for entry in entries:
        out.write(export_line(entry))
        count += 1
    return count


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    from cloudrunner.audit.query import add_jobs_argument, add_log_arguments

    add_log_arguments(parser)
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="write to OUT (replaced once complete) instead of stdout",
    )
    add_jobs_argument(parser)


def _write_parts(args: argparse.Namespace, chosen: RecordFilter, out: IO[bytes]) -> int:
    """Every record of the logs, exported to `out` in order; the files of one set are read
    in `--jobs` processes (several sets are merged by time in this one)."""
    from cloudrunner.audit.query import file_rows, select, warn_stderr, write_rows

    sets = expand(args.files)
    if len(sets) > 1 or args.jobs <= 1:
        return write_export(select(args.files, chosen, warn=warn_stderr), out)
    task = functools.partial(file_rows, chosen=chosen, render=export_line)
    return write_rows(sets, task, args.jobs, out.write)


def export_command(args: argparse.Namespace) -> int:
    from cloudrunner.audit.filters import filter_from

    chosen = filter_from(args)
    target: Path | None = args.output
    if target is None:
        count = _write_parts(args, chosen, sys.stdout.buffer)
        sys.stdout.flush()
    else:
        partial = target.with_name(f".{target.name}.partial")
        try:
            with partial.open("wb") as out:
                count = _write_parts(args, chosen, out)
            os.replace(partial, target)
        except OSError as exc:
            raise AuditLogError(f"cannot write {target}: {exc.strerror or exc}") from exc
        finally:
            partial.unlink(missing_ok=True)
        print(f"exported {count} records to {target}", file=sys.stderr)
    return ExitCode.OK
