"""The one table a run prints, and the targets under it."""

from __future__ import annotations

import math

from bench import summary
from bench.results import Report


def _fmt(value: float, digits: int = 2) -> str:
    if math.isnan(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.{digits}f}"


def render(report: Report) -> str:
    header = (
        "section",
        "case",
        "mode",
        "runtime",
        "n",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "x bare",
        "notes",
    )
    lines = []
    for row in report.rows:
        s = row.summary
        lines.append(
            (
                row.section,
                row.case,
                row.mode,
                row.runtime,
                str(s.n),
                _fmt(s.p50),
                _fmt(s.p90),
                _fmt(s.p99),
                _fmt(report.ratio_to_bare(row), 1),
                row.note,
            )
        )
    widths = [
        max(len(h), *(len(line[i]) for line in lines)) if lines else len(h)
        for i, h in enumerate(header)
    ]
    numeric = {4, 5, 6, 7, 8}

    def join(cells: tuple[str, ...]) -> str:
        out = []
        for i, cell in enumerate(cells):
            out.append(cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i]))
        return "  ".join(out).rstrip()

    text = [join(header), join(tuple("-" * w for w in widths))]
    previous = None
    for row, line in zip(report.rows, lines, strict=True):
        if previous is not None and row.section != previous:
            text.append("")
        previous = row.section
        text.append(join(line))
    figures = summary.render(report.meta.get("figures") or {})
    if figures:
        text.append("")
        text.extend(figures)
    if report.targets:
        text.append("")
        text.append("targets (DESIGN.md):")
        for target in report.targets:
            verdict = {True: "met", False: "MISSED", None: "not measured"}[target["met"]]
            text.append(f"  [{verdict}] {target['target']}: {target['measured']}")
    errors = report.meta.get("errors") or []
    if errors:
        text.append("")
        text.append("parts that failed (their rows are missing):")
        text.extend(f"  {error}" for error in errors)
    return "\n".join(text)
