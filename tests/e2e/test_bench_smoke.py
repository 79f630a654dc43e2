"""`python -m bench --smoke` still works: every part runs and lands in the JSON and the chart.

A check of the benchmark itself, never of its figures (those live in bench/, not in tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
SECTIONS = ("sandbox", "end_to_end", "throughput", "scaling", "cold_start")


def test_the_smoke_run_fills_every_section_and_writes_json_and_chart(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    env["CLOUDRUNNER_WORKER_ID"] = docker_tracker.worker_id  # what it leaves is found
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "bench.json").read_text())
    assert report["meta"]["smoke"] is True
    assert report["meta"]["runtimes"] == ["runc"]
    assert set(report["sections"]) == set(SECTIONS)
    for name in SECTIONS:
        rows = report["sections"][name]
        assert rows, f"section {name} is empty"
        for row in rows:
            assert row["n"] == len(row["samples_ms"]) > 0, row["key"]
            assert row["p50_ms"] is not None
            if row["mode"] != "bare":
                assert row["baseline"] == f"sandbox/{row['case']}/bare/host"
    modes = {(r["case"], r["mode"]) for r in report["sections"]["sandbox"]}
    for case in ("cat", "bash+jq", "python3"):
        assert {(case, m) for m in ("bare", "docker run", "hook", "session")} <= modes
    assert {r["mode"] for r in report["sections"]["end_to_end"]} >= {
        "hook client, daemon up",
        "compiled client, daemon up",
        "hook client, no console script",
        "hook client, python -IS",
        "python start-up only",
        "daemon HTTP request only",
        "bare, beside the daemon",
        "cloudrunner run (in-process)",
        "daemon request, tracing off",
        "daemon request, tracing on",
        "bare, beside the tracing rows",
    }
    for row in report["sections"]["throughput"]:
        assert row["extra"]["events_per_s"] > 0
        assert row["extra"]["peak_rss_mb"] > 0
        assert row["extra"]["daemon_cpu_ms_per_event"] >= 0
    assert len(report["sections"]["scaling"]) == 7
    assert len(report["targets"]) == 12
    figures = report["meta"]["figures"]
    for name in ("daemon_overhead_p50_ms", "client_x_interpreter", "client_is_x_interpreter",
                 "events_per_s_1", "events_per_s_4", "peak_rss_mb_4", "compiled_over_request_ms",
                 "compiled_x_bare", "tracing_on_over_off_p50_ms",
                 "tracing_off_x_bare"):  # fmt: skip
        assert isinstance(figures[name], float), name
    assert "in-daemon overhead, trivial warm hook:" in proc.stdout
    svg = (out / "bench.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    # the one table, with its targets
    assert proc.stdout.splitlines()[0].split()[:3] == ["section", "case", "mode"]
    assert "targets (DESIGN.md):" in proc.stdout
