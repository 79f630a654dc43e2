"""The parity runner end to end on one real repository of the cache, through real containers.

The cache holds third-party repositories and lives outside the project
(`python -m bench.parity.obtain`); without it these tests skip, in CI as well (CI has no
cache). CLOUDRUNNER_PARITY_CACHE names it; default `../parity-cache` next to the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
NAME = "A-chiosura__archon-cursor-integration"


@pytest.fixture
def parity_cache() -> Path:
    cache = Path(os.environ.get("CLOUDRUNNER_PARITY_CACHE") or REPO.parent / "parity-cache")
    if not (cache / "cases.json").is_file() or not (cache / "repos" / NAME).is_dir():
        pytest.skip(
            f"no parity cache with {NAME} at {cache}: fill it with "
            "python -m bench.parity.obtain (set CLOUDRUNNER_PARITY_CACHE)"
        )
    return cache


def _run(cache: Path, out: Path, worker_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    env["CLOUDRUNNER_WORKER_ID"] = worker_id  # what it leaves is found and removed
    return subprocess.run(
        [sys.executable, "-m", "bench.parity", str(cache), "--only", NAME, "--repeat", "1",
         "--out", str(out), *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _events(out: Path) -> list[dict[str, Any]]:
    events = json.loads((out / "parity.json").read_text())["events"]
    assert isinstance(events, list)
    return events


def test_every_event_of_a_repository_runs_bare_and_through_the_daemon(
    parity_cache: Path, tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    proc = _run(parity_cache, tmp_path / "out", docker_tracker.worker_id)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = _events(tmp_path / "out")
    assert len(events) == 6
    for event in events:
        assert event["error"] is None and event["skipped"] is None, event
        assert event["bare_confirms_recording"] is True, event["details"]
        # a read-only gate on a phase file: nothing the sandbox lacks, so the same answers
        assert event["answer_same"] is True, event["details"]
        assert event["exits_same"] is True, event["details"]
    ran = [e for e in events if e["hook_runs"]]
    assert ran and all(e["ratio"] is not None and len(e["client_ms"]) == 1 for e in ran)
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["repo", "event", "answer"]
    assert "parity: 6/6 answers same" in proc.stdout
    assert not docker_tracker.labelled_containers()  # the daemons removed their sandboxes


def test_a_recorded_answer_that_this_machine_does_not_give_is_reported_as_a_difference(
    parity_cache: Path, tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copyfile(parity_cache / "MANIFEST.tsv", cache / "MANIFEST.tsv")
    (cache / "repos").symlink_to(parity_cache / "repos")
    cases = json.loads((parity_cache / "cases.json").read_text())
    entry = next(c for c in cases if c["name"] == NAME)
    event = next(e for e in entry["events"] if e["id"] == "push-in-tdd-phase")
    event["expect_bare"]["answer"] = {"permission": "allow"}  # the hook really denies
    (cache / "cases.json").write_text(json.dumps(cases))
    proc = _run(cache, tmp_path / "out", docker_tracker.worker_id, "--event", "push-in-tdd-phase")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [verdict] = _events(tmp_path / "out")
    assert verdict["answer_same"] is False
    assert verdict["bare_confirms_recording"] is False
    assert verdict["details"]["answer"]["permission"] == "deny"
    assert verdict["causes"][0].startswith("bare on this host differs from the recording")
    assert "DIFF" in proc.stdout and "parity: 0/1 answers same" in proc.stdout
