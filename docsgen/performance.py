"""`python -m docsgen.performance BENCH_JSON`: the performance page's figures and its chart,
both from one `python -m bench` run's JSON, so they cannot drift apart.

It checks the JSON, copies it to docs/assets/bench.json (the page's source, committed),
draws docs/assets/bench.svg from it and fills the generated parts of docs/performance.md
(between `<!-- docsgen: performance -->` and `<!-- /docsgen: performance -->`, and the same
for `performance-split`). `python -m docsgen` fills those parts again from the committed
JSON, and its `--check` fails when the page no longer matches it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from bench import chart, end_to_end, summary
from bench.results import SECTIONS, Report, Row
from docsgen.markdown import table

PAGE = "performance.md"
JSON = "assets/bench.json"
CHART = "assets/bench.svg"
#: the page's JSON is committed: a full run with every sample is about 100 KB
MAX_BYTES = 300 * 1024
PART = {"sandbox": 1, "end_to_end": 2, "throughput": 3, "scaling": 4, "cold_start": 5}


class Host(BaseModel):
    cpus: int
    kernel: str
    python: str
    docker: str | None = None


class Meta(BaseModel):
    """What the page says about the run, from the JSON's `meta`."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    started: AwareDatetime
    smoke: bool = False
    runtimes: list[str]
    host: Host
    loadavg_start: list[Annotated[float, Field(ge=0)]] = Field(min_length=1, max_length=3)
    loadavg_end: list[Annotated[float, Field(ge=0)]] = Field(min_length=1, max_length=3)
    wall_s: float = Field(ge=0)
    errors: list[str] = Field(default_factory=list)


class Refused(Exception):
    """A bench JSON the page cannot be made from; the text says what and what to do."""


def load(path: Path) -> tuple[Report, Meta, bytes]:
    """The run in `path`, checked: a full run (not `--smoke`) with no failed part, every
    row's samples, the `meta` the page states."""
    import json

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise Refused(f"{path}: cannot be read ({exc.strerror}); give the bench.json a "
                      "`python -m bench` run wrote") from None  # fmt: skip
    if len(data) > MAX_BYTES:
        raise Refused(f"{path}: {len(data) // 1024} KB, over the {MAX_BYTES // 1024} KB the "
                      "committed page source may take; is it a `python -m bench` run?")  # fmt: skip
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refused(f"{path}: not JSON ({exc}); give the bench.json a `python -m bench` "
                      "run wrote") from None  # fmt: skip
    try:
        report = Report.from_dict(doc)
        meta = Meta.model_validate(report.meta)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(["meta", *(str(part) for part in error["loc"])])
        raise Refused(f"{path}: {where}: {error['msg']}; not a `python -m bench` run's "
                      "JSON") from None  # fmt: skip
    except ValueError as exc:
        raise Refused(f"{path}: {exc}; not a `python -m bench` run's JSON") from None
    if meta.smoke:
        raise Refused(f"{path}: a `--smoke` run, whose figures mean nothing; give a full "
                      "run's bench.json") from None  # fmt: skip
    if meta.errors:
        raise Refused(f"{path}: parts of the run failed ({'; '.join(meta.errors)}), so "
                      "their rows are missing; run the bench again")  # fmt: skip
    if not chart.shown(report):
        raise Refused(f"{path}: no row has samples; run the bench again")
    return report, meta, data


def _row(report: Report, mode: str) -> Row | None:
    row = report.row(f"end_to_end/{summary.CAT}/{mode}/runc")
    return row if row is not None and row.samples_ms else None


def _plus(value: float) -> str:
    return f"{value:+.2f} ms"


def _run(meta: Meta, report: Report) -> str:
    host = meta.host
    missing = [f"{chart.TITLES[name].lower()} (part {PART[name]})" for name in SECTIONS
               if not any(row.section == name for row in chart.shown(report))]  # fmt: skip
    started = meta.started.astimezone(UTC)
    text = (
        f"One run of `python -m bench`, started `{started:%Y-%m-%dT%H:%M:%SZ}` and "
        f"{meta.wall_s:.0f} s long, on a {host.cpus}-core machine (Linux {host.kernel}"
        + (f", Docker {host.docker}" if host.docker else "")
        + f", Python {host.python}); 1-minute load average {meta.loadavg_start[0]:.2f} at the "
        f"start and {meta.loadavg_end[0]:.2f} at the end. Runtimes: "
        f"{', '.join(meta.runtimes)}."
    )
    if missing:
        text += f" Not in this run: {', '.join(missing)}."
    return text


def _summary(report: Report) -> list[tuple[str, str]]:
    found = summary.figures(report)
    rows: list[tuple[str, str]] = []
    if "daemon_overhead_p50_ms" in found:
        rows.append((
            "in-daemon overhead: a trivial hook in a warm `session` sandbox, the daemon's "
            "answer over the bare `sh -c cat` taken beside it",
            f"{_plus(found['daemon_overhead_p50_ms'])} at p50, "
            f"{_plus(found['daemon_overhead_p99_ms'])} at p99 "
            f"({found['daemon_request_x_bare']:.2f}x bare)",
        ))  # fmt: skip
    request = _row(report, end_to_end.REQUEST)
    if "compiled_p50_ms" in found and request is not None:
        rows.append((
            "the compiled client `cloudrunner-hook`, over the daemon's answer",
            f"{_plus(found['compiled_over_request_ms'])} "
            f"({chart.ms(found['compiled_p50_ms'])} ms end to end, "
            f"{found['compiled_x_bare']:.2f}x bare)",
        ))  # fmt: skip
    clients = (("client", "cloudrunner hook"), ("client_is", "python3 -IS cloudrunner hook"))
    for key, name in clients:
        if f"{key}_own_over_interpreter_ms" not in found or request is None:
            continue
        over = found[f"{key}_p50_ms"] - request.summary.p50
        rows.append((
            f"`{name}`, over the daemon's answer",
            f"{_plus(over)}: the interpreter's start-up "
            f"({chart.ms(found['interpreter_p50_ms'])} ms for `python3 -I -S -c pass`) and "
            f"the client's own work ({_plus(found[f'{key}_own_over_interpreter_ms'])})",
        ))  # fmt: skip
    levels = [n for n in (1, 4, 8, 32) if f"events_per_s_{n}" in found]
    if levels:
        cpu = [found.get(f"daemon_cpu_ms_per_event_{n}") for n in levels]
        rows.append((
            "events/s through one daemon, " + " / ".join(map(str, levels)) + " sessions",
            " / ".join(f"{found[f'events_per_s_{n}']:.0f}" for n in levels)
            + (" (daemon CPU " + " / ".join(f"{c:.2f}" for c in cpu) + " ms per event)"
               if None not in cpu else ""),
        ))  # fmt: skip
        rows.append((
            "the daemon's peak memory (RSS), " + " / ".join(map(str, levels)) + " sessions",
            " / ".join(f"{found[f'peak_rss_mb_{n}']:.0f}" for n in levels) + " MB",
        ))  # fmt: skip
    return rows


def _ratio(report: Report, row: Row) -> str:
    value = report.ratio_to_bare(row)
    return "-" if value != value else f"{value:.1f}"


def _section(report: Report, name: str, rows: list[Row]) -> str:
    shown = chart.shown(report)
    if name == "throughput":
        return table(
            ["sessions", "n", "p50 ms", "p99 ms", "x bare", "events/s",
             "daemon CPU ms/event", "peak RSS MB"],
            [(chart.label(r, shown), r.summary.n, chart.ms(r.summary.p50),
              chart.ms(r.summary.p99), _ratio(report, r), _extra(r, "events_per_s", 0),
              _extra(r, "daemon_cpu_ms_per_event", 2), _extra(r, "peak_rss_mb", 0))
             for r in rows],
        )  # fmt: skip
    return table(
        ["row", "n", "p50 ms", "p99 ms", "x bare", "what it is"],
        [(chart.label(r, shown), r.summary.n, chart.ms(r.summary.p50), chart.ms(r.summary.p99),
          _ratio(report, r), r.note) for r in rows],
    )  # fmt: skip


def _extra(row: Row, key: str, digits: int) -> str:
    value = row.extra.get(key)
    return f"{value:.{digits}f}" if isinstance(value, int | float) else "-"


def render(report: Report, meta: Meta, chart_path: str = CHART) -> str:
    """The page's "Current figures": the run, the chart, the summary, a table per section."""
    parts = [
        _run(meta, report),
        f"![The latency of every row below: box p25-p75, whiskers p1-p99, p50 at the right, "
        f"log scale]({chart_path})",
    ]
    figures = _summary(report)
    if figures:
        parts.append("### Summary\n\n" + table(["figure", "value"], figures).rstrip())
    shown = chart.shown(report)
    for name in SECTIONS:
        rows = [r for r in shown if r.section == name]
        if rows:
            parts.append(f"### {chart.TITLES[name]}\n\n" + _section(report, name, rows).rstrip())
    return "\n\n".join(parts) + "\n"


def render_split(report: Report) -> str:
    """The page's "How the time splits": the steps of the in-daemon overhead, each a difference of
    two rows of the run."""
    found = summary.figures(report)
    request = _row(report, end_to_end.REQUEST)
    bare = _row(report, end_to_end.BARE)
    if "front_p50_ms" not in found or request is None or bare is None:
        return "The run above did not measure the daemon (part 2).\n"
    lead = (
        "An event answered by the daemon, with one trivial hook in a warm `session` sandbox, "
        f"is the bare hook plus {found['daemon_overhead_p50_ms']:.2f} ms in the run above. "
        "Part 2 of the benchmark also times `GET /healthz` (the HTTP front alone) and an "
        "event no hook matches, so the overhead splits into differences of rows of one run "
        f"(p50, {request.summary.n} rounds, the bare hook {chart.ms(bare.summary.p50)} ms):"
    )
    steps = [
        ("the HTTP front: connect, parse, route, answer", chart.ms(found["front_p50_ms"])),
        ("the worker for an event no hook matches: hand-over to an event thread and back, "
         "payload checks, workspace and gate, sources, plan, merge, its `received` and "
         "`decision` records and their one sync",
         f"{found['event_over_front_ms']:+.2f}"),
        ("one hook: the sync of the `received` record before it runs, the request to the "
         "session agent, the spawn inside the container, the hook, its record and the last "
         "sync", f"{found['sandbox_hook_over_bare_ms']:+.2f} over the bare hook"),
    ]  # fmt: skip
    return lead + "\n\n" + table(["step", "ms"], steps)


def fragments(docs: Path) -> dict[str, Callable[[], str]]:
    """The page's generated parts, from the JSON committed beside it."""

    def made() -> tuple[Report, Meta]:
        report, meta, _ = load(docs / JSON)
        return report, meta

    return {
        "performance": lambda: render(*made()),
        "performance-split": lambda: render_split(made()[0]),
    }


def write(source: Path, docs: Path) -> list[Path]:
    """Copy the run's JSON beside the page, draw the chart, fill the page; the files
    written."""
    from docsgen.__main__ import FRAGMENT, fill

    report, meta, data = load(source)
    page = docs / PAGE
    try:
        text = page.read_text()
    except OSError as exc:
        raise Refused(f"{page}: cannot be read ({exc.strerror}); --docs names the docs "
                      "folder") from None  # fmt: skip
    names = {match.group(2) for match in FRAGMENT.finditer(text)}
    wanted = {"performance", "performance-split"}
    if not wanted <= names:
        raise Refused(f"{page}: no `<!-- docsgen: {sorted(wanted - names)[0]} -->` part to "
                      "fill; put the markers back where the figures go")  # fmt: skip
    rendered = {"performance": render(report, meta), "performance-split": render_split(report)}
    made = {docs / JSON: data, docs / CHART: chart.render(report).encode(),
            page: fill(text, rendered).encode()}  # fmt: skip
    for path, content in made.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        except OSError as exc:
            raise Refused(f"{path}: cannot be written ({exc.strerror})") from None
    return list(made)


def main(argv: list[str] | None = None) -> int:
    from docsgen.__main__ import DOCS

    parser = argparse.ArgumentParser(
        prog="python -m docsgen.performance", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("bench_json", type=Path, metavar="BENCH_JSON",
                        help="the bench.json a `python -m bench` run wrote")  # fmt: skip
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder")
    args = parser.parse_args(argv)
    try:
        written = write(args.bench_json, args.docs)
    except Refused as exc:
        print(f"docsgen.performance: error: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"docsgen.performance: wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
