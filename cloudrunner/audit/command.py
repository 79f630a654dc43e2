"""`cloudrunner audit verify FILE`: the command-line face of `verify_log`."""

from __future__ import annotations

import argparse
import json

from cloudrunner.audit.verify import VerifyReport, verify_log
from cloudrunner.errors import ExitCode


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE",
        help="the live audit log; its rotated files FILE.1, FILE.2, ... are checked with it",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default): one line per problem and a summary; json: one JSON object",
    )


def verify_command(args: argparse.Namespace) -> int:
    report = verify_log(args.file)
    if args.format == "json":
        print(json.dumps(report.as_json(), indent=2))
    else:
        print(render_text(report))
    return ExitCode.OK if report.ok else ExitCode.FINDINGS


def render_text(report: VerifyReport) -> str:
    out: list[str] = [problem.text() for problem in report.problems]
    files = report.files[-1] if report.files else "?"
    if len(report.files) > 1:
        files += f" (+{len(report.files) - 1} rotated)"
    if report.records:
        span = f"{report.records} records, seq {report.first_seq}..{report.last_seq}"
    else:
        span = "no records"
    acknowledged = [torn for torn in report.torn if torn.acknowledged_by is not None]
    torn = f", {len(acknowledged)} torn record(s) acknowledged" if acknowledged else ""
    for line in acknowledged:
        out.append(
            f"torn: {line.file}:{line.line}: {line.length} bytes at offset {line.offset} "
            f"(sha256 {line.sha256[:16]}…), acknowledged by seq {line.acknowledged_by}"
        )
    out.extend(f"note: {note}" for note in report.notes)
    if report.ok:
        out.append(f"audit log OK: {files}: {span}{torn}")
        if report.last_hash is not None:
            out.append(f"last hash: {report.last_hash}")
    else:
        count = len(report.problems)
        out.append(f"audit log BROKEN: {files}: {count} problem{'s' if count > 1 else ''}; {span}")
    return "\n".join(out)
