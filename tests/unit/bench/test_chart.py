"""bench/chart.py: the chart's rows, their labels and its bytes."""

from __future__ import annotations

from bench import chart
from bench.results import Report, Row


def test_labels_name_the_hook_and_runtime_only_where_a_section_has_several() -> None:
    r = Report({})
    r.add(Row("sandbox", "cat", "bare", "host", [1.0]))
    r.add(Row("sandbox", "jq", "session", "runc", [2.0]))
    r.add(Row("end_to_end", "cat", "compiled client, daemon up", "runc", [3.0]))
    r.add(Row("end_to_end", "cat", "not measured", "runc", []))
    shown = chart.shown(r)
    assert [chart.label(row, shown) for row in shown] == [
        "cat · bare · host", "jq · session · runc", "compiled client, daemon up",
    ]  # fmt: skip


def test_the_same_run_gives_the_same_svg_with_its_boxes_in_it() -> None:
    r = Report({})
    r.add(Row("end_to_end", "cat", "cloudrunner run (in-process)", "runc", [800.0, 1200.0]))
    first, second = chart.render(r), chart.render(r)
    assert first == second and "<dc:date>" not in first
    [box] = chart.drawn(first)
    assert box["label"] == "cloudrunner run (in-process)" and box["p50"] == 1000.0
    assert ">1000</text>" in first  # its p50, written beside the box


def test_a_run_without_samples_still_draws_a_chart() -> None:
    svg = chart.render(Report({}))
    assert "nothing measured" in svg and chart.drawn(svg) == []
