"""`cloudrunner audit ...`: verify (the command-line face of `verify_log`) here, and the
reading commands (query, stats, tail, export) wired to the modules that hold them (their
flags and handlers live beside the readers in cloudrunner/audit/)."""

from __future__ import annotations

import argparse
import json

from cloudrunner.audit.verify import VerifyReport, verify_log
from cloudrunner.command_groups import command_group, subcommand
from cloudrunner.errors import ExitCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cloudrunner.audit import export, query, stats, tail

    group = command_group(sub, "audit", "inspect and verify the audit log")
    subcommand(
        group,
        "verify",
        "check the hash chain of an audit log and its rotated files",
        add_verify_arguments,
        verify_command,
    )
    subcommand(
        group,
        "query",
        "the records that match filters, as a table or JSON lines",
        query.add_query_arguments,
        query.query_command,
    )
    subcommand(
        group,
        "stats",
        "counts, decisions, durations, failures per event and hook",
        stats.add_stats_arguments,
        stats.stats_command,
    )
    subcommand(
        group,
        "tail",
        "the last records, and with -f new ones across rotation",
        tail.add_tail_arguments,
        tail.tail_command,
    )
    subcommand(group, "export", "one JSON lines stream for a log pipeline, chain kept",
               export.add_export_arguments, export.export_command)  # fmt: skip


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        metavar="FILE",
        nargs="+",
        help="a live audit log; its rotated files FILE.1, FILE.2(.gz), ... are checked with "
        "it as one chain; several FILEs are checked one by one",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default): one line per problem and a summary; json: one JSON object",
    )
    from cloudrunner.audit.query import add_jobs_argument

    add_jobs_argument(parser)


def verify_command(args: argparse.Namespace) -> int:
    reports = [verify_log(file, jobs=args.jobs) for file in args.files]
    ok = all(report.ok for report in reports)
    if args.format == "json":
        if len(reports) == 1:
            print(json.dumps(reports[0].as_json(), indent=2))
        else:
            print(json.dumps({"ok": ok, "logs": [r.as_json() for r in reports]}, indent=2))
    else:
        print("\n".join(render_text(report) for report in reports))
    return ExitCode.OK if ok else ExitCode.FINDINGS


def render_text(report: VerifyReport) -> str:
    out: list[str] = [problem.text() for problem in report.problems]
    out.extend(f"incomplete: {problem.text()}" for problem in report.incomplete)
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
    elif report.verdict == "incomplete":
        count = len(report.incomplete)
        seqs = ", ".join(str(problem.seq) for problem in report.incomplete[:10])
        more = ", ..." if count > 10 else ""
        out.append(
            f"audit log INCOMPLETE: {files}: the chain holds, but {count} event"
            f"{'s have' if count > 1 else ' has'} no decision record (received as seq "
            f"{seqs}{more}); {span}"
        )
    elif report.verdict == "truncated":
        out.append(
            f"audit log TRUNCATED: {files}: the last record was cut short, most likely by a "
            f"crash mid-write (not tampering); {span}"
        )
    else:
        count = len(report.problems)
        first = report.first_problem
        assert first is not None
        seq = f" (seq {first.seq})" if first.seq is not None else ""
        out.append(
            f"audit log BROKEN: {files}: {count} problem{'s' if count > 1 else ''}; {span}; "
            f"first at {first.file}:{first.line}{seq}"
        )
    return "\n".join(out)
