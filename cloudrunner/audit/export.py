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
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from cloudrunner.audit.errors import AuditLogError
from cloudrunner.audit.reader import Entry
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
    from cloudrunner.audit.query import add_log_arguments

    add_log_arguments(parser)
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="write to OUT (replaced once complete) instead of stdout",
    )


def export_command(args: argparse.Namespace) -> int:
    from cloudrunner.audit.filters import filter_from
    from cloudrunner.audit.query import select, warn_stderr

    entries = select(args.files, filter_from(args), warn=warn_stderr)
    target: Path | None = args.output
    if target is None:
        count = write_export(entries, sys.stdout.buffer)
        sys.stdout.flush()
    else:
        partial = target.with_name(f".{target.name}.partial")
        try:
            with partial.open("wb") as out:
                count = write_export(entries, out)
            os.replace(partial, target)
        except OSError as exc:
            raise AuditLogError(f"cannot write {target}: {exc.strerror or exc}") from exc
        finally:
            partial.unlink(missing_ok=True)
        print(f"exported {count} records to {target}", file=sys.stderr)
    return ExitCode.OK
