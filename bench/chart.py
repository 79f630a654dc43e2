"""The latency distributions as an SVG: one panel per section, one box per row, log scale."""

from __future__ import annotations

from pathlib import Path

from bench.results import SECTIONS, Report


def write_chart(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display here; must be chosen before pyplot is imported
    import matplotlib.pyplot as plt

    panels = [
        (name, [r for r in report.rows if r.section == name and r.samples_ms]) for name in SECTIONS
    ]
    panels = [(name, rows) for name, rows in panels if rows]
    if not panels:
        panels = [("nothing measured", [])]
    heights = [max(1.2, 0.32 * len(rows) + 0.8) for _, rows in panels]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(10, sum(heights)),
        squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )
    for ax, (name, rows) in zip(axes[:, 0], panels, strict=True):
        ax.set_title(name.replace("_", " "), loc="left", fontsize=10)
        if not rows:
            continue
        labels = [f"{r.case} | {r.mode} | {r.runtime}" for r in rows]
        ax.boxplot(
            [r.samples_ms for r in rows],
            vert=False,
            whis=(1, 99),
            showfliers=True,
            flierprops={"markersize": 2},
            widths=0.6,
        )
        ax.set_yticks(range(1, len(rows) + 1), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.grid(axis="x", which="both", alpha=0.3)
        ax.set_xlabel("milliseconds (box: p25-p75, whiskers: p1-p99)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="svg")
    plt.close(fig)
