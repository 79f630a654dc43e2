"""What the runner decides before running anything."""

from __future__ import annotations

from pathlib import Path

from bench.parity.cases import Event, Repository
from bench.parity.runner import Options, run_event


def test_an_event_cloud_agents_never_send_is_a_documented_skip_not_a_difference(
    tmp_path: Path,
) -> None:
    event = Event("start", "sessionStart", None, None, {}, "", None, {"hooks": [], "answer": {}})
    repo = Repository("a__b", "a/b", "c" * 40, "MIT", "as committed", (), (event,))
    verdict = run_event(repo, event, tmp_path / "tree", tmp_path / "work", Options("w"))
    assert verdict.skipped is not None and "deliberate difference" in verdict.skipped
    assert verdict.error is None and not (tmp_path / "work").exists()
