"""bench.same_records: what it drops as run-specific, and what it still tells apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.same_records import compare, main, normalised

RECORD = {
    "kind": "hook",
    "seq": 5,
    "time": "2026-12-06T02:58:27.077284Z",
    "hash": "ab" * 32,
    "prev_hash": "cd" * 32,
    "pid": 1752,
    "duration_ms": 42.4,
    "source": "project",
    "exit_code": 0,
    "workspace": "/w/checkout/.demo/run-6kpxyjfz/workspace",
    "attestation": {
        "container_id": "47fbef5719d5",
        "mounts": [
            {"source": "/w/checkout/.demo/run-x_1/state/sandbox-channels/session-57b-2yq/a"},
            {"source": "/w/checkout/.demo/run-x_1/state/homes/364a6fe822d3b"},
        ],
    },
}


def _log(path: Path, *records: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_two_runs_of_one_build_are_the_same_records(tmp_path: Path) -> None:
    other = json.loads(json.dumps(RECORD))
    other.update(time="2026-12-07T00:00:00Z", hash="ef" * 32, pid=9, duration_ms=90.0)
    other["workspace"] = "/elsewhere/.demo/run-abc/workspace"
    other["attestation"]["container_id"] = "f8031b7e01c3"
    other["attestation"]["mounts"][0]["source"] = (
        "/elsewhere/.demo/run-abc/state/sandbox-channels/session-9cb-8ko/a"
    )
    other["attestation"]["mounts"][1]["source"] = "/elsewhere/.demo/run-abc/state/homes/99ff00aa11"
    assert compare(_log(tmp_path / "a", RECORD), _log(tmp_path / "b", other)) == []


@pytest.mark.parametrize(
    ("field", "value"), [("source", "enterprise"), ("exit_code", 2), ("seq", 6)]
)
def test_a_changed_field_is_named_with_both_values(
    tmp_path: Path, field: str, value: object
) -> None:
    other = {**RECORD, field: value}
    (line,) = compare(_log(tmp_path / "a", RECORD), _log(tmp_path / "b", other))
    assert line == (f"record 0 (hook) .{field}: {json.dumps(RECORD[field])} != {json.dumps(value)}")


def test_a_deeper_difference_and_a_missing_record_are_both_reported(tmp_path: Path) -> None:
    other = json.loads(json.dumps(RECORD))
    other["attestation"]["mounts"][1]["source"] = "/etc"
    lines = compare(_log(tmp_path / "a", RECORD, RECORD), _log(tmp_path / "b", other))
    assert lines[0] == "2 records against 1"
    assert lines[1].startswith("record 0 (hook) .attestation.mounts[1].source: ")


def test_normalised_keeps_what_is_not_run_specific() -> None:
    kept = normalised(RECORD)
    assert kept["source"] == "project" and kept["seq"] == 5
    assert "time" not in kept and "hash" not in kept
    assert kept["workspace"] == "RUN/workspace"


def test_compare_exits_1_on_a_difference_and_a_missing_log_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _log(tmp_path / "a", RECORD)
    b = _log(tmp_path / "b", {**RECORD, "exit_code": 1})
    assert main(["compare", str(a), str(a)]) == 0
    assert main(["compare", str(a), str(b)]) == 1
    with pytest.raises(SystemExit) as exited:
        main(["compare", str(a), str(tmp_path / "missing")])
    assert exited.value.code == 2
    assert "no such file (make it with `record`)" in capsys.readouterr().err
