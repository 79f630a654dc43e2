"""deploygen/chart.py: the dashboard's queries drawn from a Prometheus's answers."""

from __future__ import annotations

from pathlib import Path

from deploygen import chart, grafana


def test_every_panel_with_queries_is_drawn_in_order() -> None:
    board = grafana.build()
    drawn = chart.panels(board)
    with_queries = [p for p in board["panels"] if p["type"] != "row"]
    assert [p.title for p in drawn] == [p["title"] for p in with_queries]
    memory = next(p for p in drawn if p.title == "Daemon memory")
    assert memory.unit == "bytes"
    assert memory.queries == [
        (
            'sum by (instance) (process_resident_memory_bytes{job=~"$job", instance=~"$instance"})',
            "{{instance}}",
        )
    ]


def test_variables_and_legends_are_filled_as_grafana_fills_them() -> None:
    expr = 'rate(x{job=~"$job", instance=~"$instance"}[$__rate_interval])'
    variables = {"job": "cloudrunner", "instance": ".*", "__rate_interval": "4s"}
    assert chart.substitute(expr, variables) == 'rate(x{job=~"cloudrunner", instance=~".*"}[4s])'
    assert chart.legend("{{event}} {{ result }}", {"event": "stop", "result": "ok"}) == "stop ok"
    assert chart.legend("{{missing}}", {}) == ""


def test_the_chart_is_an_svg_with_each_panel_and_series(tmp_path: Path) -> None:
    drawn = chart.panels(grafana.build())
    seen: list[str] = []

    def query_range(expr: str) -> list[tuple[dict[str, str], chart.Points]]:
        seen.append(expr)
        if "process_resident_memory_bytes" in expr:
            return [({"instance": "vm-a:8765"}, [(0.0, 6e7), (1.0, 6.1e7)])]
        return []

    chart.fill(drawn, query_range, {"job": "cloudrunner", "instance": ".*"})
    assert seen and all("$job" not in e and "$instance" not in e for e in seen)
    target = tmp_path / "dashboard.svg"
    chart.write_chart(drawn, target, title="a test")
    svg = target.read_text()
    assert svg.startswith("<?xml") and "</svg>" in svg
    assert "Daemon memory" in svg and "vm-a:8765" in svg  # text stays text
    assert "no data" in svg  # the panels whose queries returned nothing say so
