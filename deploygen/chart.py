"""The dashboard's panels drawn from a Prometheus's data as an SVG, for the docs where no
Grafana renders the dashboard itself: the same queries (`grafana.build()`'s), the dashboard's
variables given values, each panel a plot of the series its queries return."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: (seconds since the first point, value) of one series
Points = list[tuple[float, float]]


@dataclass
class Panel:
    title: str
    unit: str
    #: each query's expression and legend template ("{{event}} {{result}}")
    queries: list[tuple[str, str]]
    #: what the queries returned: a legend and its points
    series: list[tuple[str, Points]] = field(default_factory=list)


def panels(board: dict[str, Any]) -> list[Panel]:
    """The dashboard's panels with queries (rows left out), top to bottom."""
    return [
        Panel(
            p["title"],
            p.get("fieldConfig", {}).get("defaults", {}).get("unit", ""),
            [(t["expr"], t.get("legendFormat", "")) for t in p["targets"]],
        )
        for p in board["panels"]
        if p.get("targets")
    ]


def substitute(expr: str, variables: dict[str, str]) -> str:
    """`expr` with the dashboard's variables (`$job`, `$__rate_interval`, ...) replaced."""
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace(f"${name}", variables[name])
    return expr


def legend(template: str, labels: dict[str, str]) -> str:
    """A legend template filled from a series' labels, as Grafana fills it."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template).strip()


def fill(
    board_panels: Sequence[Panel],
    query_range: Callable[[str], list[tuple[dict[str, str], Points]]],
    variables: dict[str, str],
) -> None:
    """Run each panel's queries through `query_range` (labels and points per series)."""
    for panel in board_panels:
        for expr, template in panel.queries:
            for labels, points in query_range(substitute(expr, variables)):
                panel.series.append((legend(template, labels) or expr[:40], points))


def write_chart(board_panels: Sequence[Panel], path: Path, *, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display here; must be chosen before pyplot is imported
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text (and the file small)
    matplotlib.rcParams["svg.hashsalt"] = "cloudrunner"  # the same ids from run to run
    columns = 2
    rows = (len(board_panels) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(12, 2.6 * rows), squeeze=False)
    end = max((x for p in board_panels for _, pts in p.series for x, _ in pts), default=1.0)
    for ax, panel in zip(axes.flat, board_panels, strict=False):
        ax.set_title(panel.title, loc="left", fontsize=9)
        for name, points in panel.series:
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, label=name, linewidth=1.2)
        if panel.series:
            ax.legend(fontsize=6, loc="upper left", frameon=False)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlim(0, end)  # one time axis for every panel
        ax.set_ylabel(panel.unit, fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(board_panels) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("seconds", fontsize=7)
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.98))  # room for the title above the first row
    kind = path.suffix.lstrip(".") or "svg"  # .svg for the docs, .png to look at it
    fig.savefig(path, format=kind, metadata={"Date": None} if kind == "svg" else None, dpi=80)
    plt.close(fig)
