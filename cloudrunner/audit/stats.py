"""`cloudrunner audit stats`: what ran and what it decided, summed up in one pass.

Per event: answers by decision label, gated and refused events. Per (event, source, hook
command): runs by outcome, failures, timeouts, p50/p95/max duration. Per source: runs by
outcome. And the commands blocked most often (from the `decision` records of shell and
tool events). The log is streamed; only the counters and the durations are kept.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from cloudrunner.audit.filters import DECISION_LABELS, RecordFilter, decision_label
from cloudrunner.audit.parallel import per_file, work_of
from cloudrunner.audit.reader import Entry, expand, read_file
from cloudrunner.audit.records import (
    AnyRecord,
    RecordKind,
    StoredDecision,
    StoredEgress,
    StoredHook,
    view,
)
from cloudrunner.errors import ExitCode

#: the kinds the tally reads (bound once: the loop below runs for every record)
_HOOK, _DECISION, _GATED, _REFUSED, _EGRESS = (
    RecordKind.HOOK, RecordKind.DECISION, RecordKind.GATED, RecordKind.REFUSED, RecordKind.EGRESS,
)  # fmt: skip

#: outcomes that count as a failure of the hook (a block is a hook doing its job)
FAILURE_OUTCOMES = frozenset(
    {"error", "timeout", "invalid_output", "output_overflow", "oom", "sandbox_error"}
)
BLOCKING_LABELS = frozenset({"deny", "ask", "block"})


def percentile(values: array[float], fraction: float) -> float | None:
    """Nearest-rank percentile of sorted `values`."""
    if not values:
        return None
    rank = max(1, -(-len(values) * fraction // 1))  # ceil(n * fraction), at least 1
    return values[int(rank) - 1]


@dataclass
class HookStats:
    runs: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    durations: array[float] = field(default_factory=lambda: array("d"))

    def summary(self) -> dict[str, Any]:
        ordered = array("d", sorted(self.durations))
        return {
            "runs": self.runs,
            "outcomes": dict(sorted(self.outcomes.items())),
            "failures": sum(n for o, n in self.outcomes.items() if o in FAILURE_OUTCOMES),
            "timeouts": self.outcomes.get("timeout", 0),
            "blocked": self.outcomes.get("blocked", 0),
            "duration_ms": {
                "p50": percentile(ordered, 0.50),
                "p95": percentile(ordered, 0.95),
                "max": ordered[-1] if ordered else None,
            },
        }


@dataclass
class EventStats:
    decisions: Counter[str] = field(default_factory=Counter)
    gated: int = 0
    refused: int = 0

    def summary(self) -> dict[str, Any]:
        order = {label: n for n, label in enumerate(DECISION_LABELS)}
        return {
            "answered": sum(self.decisions.values()),
            "decisions": dict(
                sorted(self.decisions.items(), key=lambda kv: order.get(kv[0], len(order)))
            ),
            "gated": self.gated,
            "refused": self.refused,
        }


def _blocked_command(record: AnyRecord) -> str | None:
    """The command of a blocked shell or tool event, from its `decision` record's payload."""
    decision = view(record, RecordKind.DECISION)
    payload = decision.get("payload") if decision is not None else None
    if not isinstance(payload, Mapping):
        return None
    command = payload.get("command")
    if not isinstance(command, str):
        tool_input = payload.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, Mapping) else None
    return command if isinstance(command, str) else None


@dataclass
class Stats:
    records: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    events: dict[str, EventStats] = field(default_factory=dict)
    hooks: dict[tuple[str, str, str], HookStats] = field(default_factory=dict)
    sources: dict[str, Counter[str]] = field(default_factory=dict)
    blocked_commands: Counter[str] = field(default_factory=Counter)
    #: egress attempts per source and decision (allowed / refused)
    egress: dict[str, Counter[str]] = field(default_factory=dict)
    refused_hosts: Counter[str] = field(default_factory=Counter)
    first_time: str | None = None
    last_time: str | None = None

    def add(self, record: AnyRecord) -> None:
        # Once per record of the log (a million in the benchmark): locals, dict lookups and
        # HookStats updated in place, no helper calls on the common path (so a kind's typed
        # view is a cast once its kind is known, rather than `records.view`).
        self.records += 1
        kind: object = record.get("kind")
        if type(kind) is not str:
            kind = str(kind)
        kinds = self.kinds
        kinds[kind] = kinds.get(kind, 0) + 1
        moment = record.get("time")
        if type(moment) is str:
            first = self.first_time
            if first is None or moment < first:
                self.first_time = moment
            last = self.last_time
            if last is None or moment > last:
                self.last_time = moment
        event = record.get("event") or ""
        if type(event) is not str:
            event = str(event)
        if kind == _HOOK:
            hook_record = cast(StoredHook, record)
            source = hook_record.get("source") or ""
            if type(source) is not str:
                source = str(source)
            outcome = hook_record.get("outcome") or ""
            if type(outcome) is not str:
                outcome = str(outcome)
            command = hook_record.get("command") or ""
            key = (event, source, command if type(command) is str else str(command))
            hook = self.hooks.get(key)
            if hook is None:
                hook = self.hooks[key] = HookStats()
            hook.runs += 1
            outcomes = hook.outcomes
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            duration = hook_record.get("duration_ms")
            if type(duration) is float or type(duration) is int:
                hook.durations.append(duration)
            per_source = self.sources.get(source)
            if per_source is None:
                per_source = self.sources[source] = Counter()
            per_source[outcome] = per_source.get(outcome, 0) + 1
        elif kind in (_DECISION, _GATED, _REFUSED):
            stats = self.events.get(event)
            if stats is None:
                stats = self.events[event] = EventStats()
            if kind == _GATED:
                stats.gated += 1
            elif kind == _REFUSED:
                stats.refused += 1
            else:
                label = decision_label(cast(StoredDecision, record).get("decision")) or "none"
                stats.decisions[label] += 1
                if label in BLOCKING_LABELS:
                    blocked = _blocked_command(record)
                    if blocked is not None:
                        self.blocked_commands[blocked] += 1
        elif kind == _EGRESS and "decision" in record:
            egress = cast(StoredEgress, record)
            source = str(egress.get("source") or "unknown")
            per_source = self.egress.get(source)
            if per_source is None:
                per_source = self.egress[source] = Counter()
            decision = str(egress.get("decision"))
            per_source[decision] += 1
            if decision == "refused":
                self.refused_hosts[f"{source} {egress.get('host')}:{egress.get('port')}"] += 1

    def merge(self, other: Stats) -> None:
        """Add `other`'s counts (a part of the log read elsewhere) to these."""
        self.records += other.records
        self.kinds.update(other.kinds)
        for name, event in other.events.items():
            mine = self.events.setdefault(name, EventStats())
            mine.decisions.update(event.decisions)
            mine.gated += event.gated
            mine.refused += event.refused
        for key, hook in other.hooks.items():
            target = self.hooks.setdefault(key, HookStats())
            target.runs += hook.runs
            target.outcomes.update(hook.outcomes)
            target.durations.extend(hook.durations)
        for name, counts in other.sources.items():
            self.sources.setdefault(name, Counter()).update(counts)
        self.blocked_commands.update(other.blocked_commands)
        for name, counts in other.egress.items():
            self.egress.setdefault(name, Counter()).update(counts)
        self.refused_hosts.update(other.refused_hosts)
        for moment in (other.first_time, other.last_time):
            if moment is not None:
                if self.first_time is None or moment < self.first_time:
                    self.first_time = moment
                if self.last_time is None or moment > self.last_time:
                    self.last_time = moment

    def as_json(self, *, top: int = 10) -> dict[str, Any]:
        return {
            "records": self.records,
            "first_time": self.first_time,
            "last_time": self.last_time,
            "kinds": dict(sorted(self.kinds.items())),
            "events": {name: s.summary() for name, s in sorted(self.events.items())},
            "hooks": [
                {"event": e, "source": s, "command": c, **h.summary()}
                for (e, s, c), h in sorted(self.hooks.items())
            ],
            "sources": {
                name: {"runs": sum(c.values()), "outcomes": dict(sorted(c.items()))}
                for name, c in sorted(self.sources.items())
            },
            "top_blocked_commands": [
                {"command": command, "count": count}
                for command, count in self.blocked_commands.most_common(top)
            ],
            "egress": {
                name: {"allowed": c.get("allowed", 0), "refused": c.get("refused", 0)}
                for name, c in sorted(self.egress.items())
            },
            "top_refused_hosts": [
                {"source_host": host, "count": count}
                for host, count in self.refused_hosts.most_common(top)
            ],
        }


def collect(entries: Iterable[Entry]) -> Stats:
    stats = Stats()
    for entry in entries:
        stats.add(entry.record)
    return stats


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _table(rows: list[list[str]], right: frozenset[int] = frozenset()) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        out.append("  ".join(cells).rstrip())
    return out


def render_text(data: Mapping[str, Any]) -> str:
    out = [
        f"{data['records']} records, {data['first_time'] or '-'} .. {data['last_time'] or '-'}",
        "kinds: " + (", ".join(f"{k} {n}" for k, n in data["kinds"].items()) or "none"),
        "",
        "events",
    ]
    rows = [["EVENT", "ANSWERED", "DECISIONS", "GATED", "REFUSED"]]
    for name, event in data["events"].items():
        decisions = ", ".join(f"{k} {n}" for k, n in event["decisions"].items()) or "-"
        rows.append(
            [name, str(event["answered"]), decisions, str(event["gated"]), str(event["refused"])]
        )
    out += _table(rows, frozenset({1, 3, 4})) if len(rows) > 1 else ["  (none)"]
    out += ["", "hooks"]
    rows = [["EVENT", "SOURCE", "HOOK", "RUNS", "OUTCOMES", "FAIL", "TIMEOUT", "P50 MS",
             "P95 MS", "MAX MS"]]  # fmt: skip
    for hook in data["hooks"]:
        outcomes = ", ".join(f"{k} {n}" for k, n in hook["outcomes"].items())
        command = " ".join(hook["command"].split())
        if len(command) > 48:
            command = command[:47] + "…"
        rows.append(
            [
                hook["event"], hook["source"], command, str(hook["runs"]), outcomes,
                str(hook["failures"]), str(hook["timeouts"]), _ms(hook["duration_ms"]["p50"]),
                _ms(hook["duration_ms"]["p95"]), _ms(hook["duration_ms"]["max"]),
            ]
        )  # fmt: skip
    out += _table(rows, frozenset({3, 5, 6, 7, 8, 9})) if len(rows) > 1 else ["  (none)"]
    out += ["", "sources"]
    rows = [["SOURCE", "RUNS", "OUTCOMES"]]
    for name, source in data["sources"].items():
        outcomes = ", ".join(f"{k} {n}" for k, n in source["outcomes"].items())
        rows.append([name, str(source["runs"]), outcomes])
    out += _table(rows, frozenset({1})) if len(rows) > 1 else ["  (none)"]
    out += ["", "top blocked commands"]
    rows = [["COUNT", "COMMAND"]]
    rows += [[str(b["count"]), b["command"]] for b in data["top_blocked_commands"]]
    out += _table(rows, frozenset({0})) if len(rows) > 1 else ["  (none)"]
    out += ["", "egress"]
    rows = [["SOURCE", "ALLOWED", "REFUSED"]]
    for name, counts in data.get("egress", {}).items():
        rows.append([name, str(counts["allowed"]), str(counts["refused"])])
    out += _table(rows, frozenset({1, 2})) if len(rows) > 1 else ["  (none)"]
    out += ["", "top refused egress"]
    rows = [["COUNT", "SOURCE AND HOST"]]
    rows += [[str(h["count"]), h["source_host"]] for h in data.get("top_refused_hosts", [])]
    out += _table(rows, frozenset({0})) if len(rows) > 1 else ["  (none)"]
    return "\n".join(out)


def add_stats_arguments(parser: argparse.ArgumentParser) -> None:
    from cloudrunner.audit.query import add_jobs_argument, add_log_arguments

    add_log_arguments(parser)
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--top", type=int, default=10, metavar="N", help="how many blocked commands to list"
    )
    add_jobs_argument(parser)


def _stats_file(path: Path, is_live: bool, *, chosen: RecordFilter) -> tuple[Stats, list[str]]:
    warnings: list[str] = []
    entries = read_file(path, warnings.append, accept=chosen.accept(), is_live=is_live)
    if chosen.empty:
        return collect(entries), warnings
    return collect(e for e in entries if chosen.matches(e.record)), warnings


def stats_command(args: argparse.Namespace, out: IO[str] | None = None) -> int:
    from cloudrunner.audit.filters import filter_from
    from cloudrunner.audit.query import warn_stderr

    stream = out or sys.stdout
    task = functools.partial(_stats_file, chosen=filter_from(args))
    # Counts do not depend on order: every file of every log is a task of its own.
    stats = Stats()
    for part, warnings in per_file(task, work_of(expand(args.files)), args.jobs):
        for warning in warnings:
            warn_stderr(warning)
        stats.merge(part)
    data = stats.as_json(top=args.top)
    if args.format == "json":
        stream.write(json.dumps(data, indent=2) + "\n")
    else:
        stream.write(render_text(data) + "\n")
    return ExitCode.OK
