"""`audit stats`: counts per event, source and hook, percentiles, top blocked commands."""

from __future__ import annotations

import json
from array import array
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.audit.stats import percentile
from cloudrunner.cli import main
from tests.unit.audit.logs import sample_records, write_log


def stats(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["audit", "stats", *args, "--format", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "audit.log"
    write_log(path, sample_records(), max_bytes=1500)
    return path


def test_stats_count_events_hooks_sources_and_blocked_commands(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = stats(capsys, str(log))
    assert data["records"] == 12
    assert data["kinds"] == {"decision": 4, "gated": 1, "hook": 7}
    assert data["events"]["beforeShellExecution"] == {
        "answered": 3, "decisions": {"deny": 2, "allow": 1}, "gated": 0, "refused": 0,
    }  # fmt: skip
    assert data["events"]["beforeSubmitPrompt"]["gated"] == 1
    assert data["events"]["stop"]["decisions"] == {"followup": 1}
    guard = next(h for h in data["hooks"] if h["command"] == ".cursor/hooks/guard.sh")
    assert guard["runs"] == 3 and guard["outcomes"] == {"blocked": 2, "ok": 1}
    assert guard["blocked"] == 2 and guard["failures"] == 0
    assert guard["duration_ms"] == {"p50": 40.0, "p95": 50.0, "max": 50.0}
    enterprise = next(h for h in data["hooks"] if h["source"] == "enterprise")
    assert enterprise["timeouts"] == 1 and enterprise["failures"] == 1
    assert data["sources"]["project"] == {
        "runs": 4,
        "outcomes": {"blocked": 2, "error": 1, "ok": 1},
    }
    assert data["top_blocked_commands"] == [{"command": "rm -rf /", "count": 2}]
    assert (data["first_time"], data["last_time"]) == (
        "2025-03-01T12:00:00.000000Z", "2025-03-01T12:00:11.000000Z",
    )  # fmt: skip


def test_stats_in_several_processes_equal_one(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert stats(capsys, str(log), "--jobs", "2") == stats(capsys, str(log), "--jobs", "1")


def test_stats_take_the_filters(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = stats(capsys, str(log), "--conversation", "c2")
    assert data["records"] == 3 and data["events"]["beforeShellExecution"]["answered"] == 1


def test_the_table_names_every_part(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "stats", str(log)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("12 records, 2025-03-01T12:00:00.000000Z .. 2025-03-01T12:00:11")
    for heading in ("events", "hooks", "sources", "top blocked commands"):
        assert f"\n{heading}\n" in out
    row = next(line for line in out.splitlines() if "guard.sh" in line)
    assert row.split()[:4] == ["beforeShellExecution", "project", ".cursor/hooks/guard.sh", "3"]
    assert row.split()[-3:] == ["40.0", "50.0", "50.0"]


def test_percentile_is_nearest_rank() -> None:
    values = array("d", [1.0, 2.0, 3.0, 4.0])
    assert percentile(values, 0.5) == 2.0
    assert percentile(values, 0.95) == 4.0
    assert percentile(array("d"), 0.5) is None
