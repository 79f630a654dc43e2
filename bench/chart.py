"""The latency distributions as an SVG: one panel per section, one box per row (p25-p75,
whiskers p1-p99, its p50 written beside it), log scale. The rows and their labels are the
ones the performance page's tables show (`shown`, `label`), and the figures drawn are
written into the SVG's description as JSON, so a test can hold the chart to the table.

The SVG is the same bytes for the same run and the same matplotlib: no date, fixed ids,
text kept as text."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.results import SECTIONS, Report, Row
from bench.stats import percentile

#: each section as the chart's panels and the page's tables name it
TITLES = {
    "sandbox": "Hooks in each sandbox mode",
    "end_to_end": "The daemon and its clients",
    "throughput": "Concurrent sessions",
    "scaling": "Hooks per event",
    "cold_start": "A new session",
}


def ms(value: float) -> str:
    """A figure in milliseconds as the table and the chart write it."""
    if math.isnan(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.2f}"


def shown(report: Report) -> list[Row]:
    """The rows with samples, in the run's order: every one is a table row and a box."""
    return [row for row in report.rows if row.samples_ms]


def label(row: Row, rows: Sequence[Row]) -> str:
    """A row's name within its section: its mode, with the hook and the runtime when
    they differ between the section's rows."""
    mates = [r for r in rows if r.section == row.section]
    parts = [row.case] if len({r.case for r in mates}) > 1 else []
    parts.append(row.mode)
    if len({r.runtime for r in mates}) > 1:
        parts.append(row.runtime)
    return " · ".join(parts)


@dataclass(frozen=True)
class Box:
    section: str
    label: str
    n: int
    p1: float
    p25: float
    p50: float
    p75: float
    p99: float


def boxes(report: Report) -> list[Box]:
    rows = shown(report)
    out = []
    for row in rows:
        s = row.samples_ms
        out.append(
            Box(row.section, label(row, rows), len(s), percentile(s, 1), percentile(s, 25),
                row.summary.p50, percentile(s, 75), percentile(s, 99))
        )  # fmt: skip
    return out


def render(report: Report) -> str:
    """The chart as SVG text."""
    import matplotlib

    matplotlib.use("Agg")  # no display here; must be chosen before pyplot is imported
    import matplotlib.pyplot as plt
    from matplotlib.transforms import blended_transform_factory

    drawn = boxes(report)
    panels = [(name, [b for b in drawn if b.section == name]) for name in SECTIONS]
    panels = [(name, found) for name, found in panels if found]
    if not panels:
        panels = [("nothing measured", [])]
    heights = [max(1.2, 0.3 * len(found) + 0.9) for _, found in panels]
    with matplotlib.rc_context({
        "svg.fonttype": "none",  # text stays text (and the file small)
        "svg.hashsalt": "cloudrunner-bench",  # the same ids from run to run
        "font.family": "sans-serif",
    }):  # fmt: skip
        fig, axes = plt.subplots(
            len(panels), 1, figsize=(10, sum(heights)), squeeze=False,
            gridspec_kw={"height_ratios": heights},
        )  # fmt: skip
        for ax, (name, found) in zip(axes[:, 0], panels, strict=True):
            ax.set_title(TITLES.get(name, name), loc="left", fontsize=10)
            if not found:
                continue
            ax.bxp(
                [{"med": b.p50, "q1": b.p25, "q3": b.p75, "whislo": b.p1, "whishi": b.p99,
                  "fliers": []} for b in found],
                orientation="horizontal", widths=0.6, showfliers=False,
            )  # fmt: skip
            ax.set_yticks(range(1, len(found) + 1), [b.label for b in found], fontsize=7)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.grid(axis="x", which="both", alpha=0.3)
            ax.set_xlabel("milliseconds (box: p25-p75, whiskers: p1-p99), p50 at the right",
                          fontsize=8)  # fmt: skip
            right = blended_transform_factory(ax.transAxes, ax.transData)
            for y, b in enumerate(found, start=1):
                ax.text(1.01, y, ms(b.p50), transform=right, va="center", fontsize=7)
        fig.tight_layout()
        out = io.StringIO()
        description = json.dumps([asdict(b) for b in drawn], separators=(",", ":"))
        fig.savefig(out, format="svg", metadata={"Date": None, "Description": description})
        plt.close(fig)
    return out.getvalue()


def drawn(svg: str) -> list[dict[str, object]]:
    """The boxes a chart made by `render` holds (from its description)."""
    from xml.etree import ElementTree

    node = ElementTree.fromstring(svg).find(".//{http://purl.org/dc/elements/1.1/}description")
    if node is None or not node.text:
        raise ValueError("the chart has no description: it was not made by bench.chart")
    found: list[dict[str, object]] = json.loads(node.text)
    return found


def write_chart(report: Report, path: Path) -> None:
    path.write_text(render(report))
