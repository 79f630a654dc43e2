"""The Grafana dashboard (deploy/grafana/cloudrunner.json): the committed file is what the
generator gives, and every query reads metrics the daemon exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import deploygen.__main__ as cli
from deploygen import grafana
from tests.support.daemon_metrics import exported_names, names_in

COMMITTED = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "cloudrunner.json"


@pytest.fixture(scope="module")
def board() -> dict[str, Any]:
    return grafana.build()


def test_the_committed_dashboard_is_what_the_generator_gives() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == grafana.render(), (
        "deploy/grafana/cloudrunner.json is out of date: run `python -m deploygen`"
    )


def test_every_query_reads_metrics_the_daemon_exports(board: dict[str, Any]) -> None:
    exported = exported_names()
    queries = grafana.queries(board)
    assert len(queries) >= 20
    for expr in queries:
        read = names_in(expr)
        assert read, expr
        assert read <= exported, f"{expr}: {read - exported} not exported by the daemon"


def test_the_panels_an_operator_needs_are_there(board: dict[str, Any]) -> None:
    read = set().union(*(names_in(q) for q in grafana.queries(board)))
    assert {
        "cloudrunner_events_total",
        "cloudrunner_hook_outcomes_total",
        "cloudrunner_event_duration_seconds_bucket",
        "cloudrunner_fallback_events_total",
        "cloudrunner_sessions",
        "cloudrunner_max_sessions",
        "cloudrunner_audit_write_failures_total",
        "cloudrunner_ready",
        "cloudrunner_engine_up",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    } <= read
    exprs = grafana.queries(board)
    assert any(e.startswith("histogram_quantile(0.99,") for e in exprs)
    assert any(e.startswith("histogram_quantile(0.5,") for e in exprs)


def test_panels_have_unique_ids_a_title_and_the_chosen_data_source(board: dict[str, Any]) -> None:
    panels = board["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"] and panel["description"]
    assert board["uid"] == "cloudrunner"
    names = [v["name"] for v in board["templating"]["list"]]
    assert names == ["datasource", "job", "instance"]


def test_panels_do_not_overlap(board: dict[str, Any]) -> None:
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        mine = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not cells & mine, panel["title"]
        cells |= mine


def test_check_mode_says_a_stale_file_is_stale_and_writing_fixes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "deploy" / "grafana" / "cloudrunner.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"title": "hand-edited"}))
    monkeypatch.setattr(cli, "ROOT", tmp_path)
    monkeypatch.setattr(cli, "DASHBOARD", target)
    assert cli.main(["--check"]) == 1
    assert "deploy/grafana/cloudrunner.json is out of date" in capsys.readouterr().err
    assert cli.main([]) == 0
    assert cli.main(["--check"]) == 0
    assert target.read_text() == grafana.render()


def test_the_query_reader_finds_the_selector_of_a_query_variable() -> None:
    board = {
        "templating": {
            "list": [{"type": "query", "query": 'label_values(cloudrunner_nothing{job="x"}, job)'}]
        }
    }
    assert grafana.queries(board) == ['cloudrunner_nothing{job="x"}']
    assert not names_in(grafana.queries(board)[0]) <= exported_names()
