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


def test_a_program_the_sandbox_lacks_is_named_as_the_cause_of_a_flipped_answer(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    """A made-up repository (no cache needed): a failClosed guard that runs a program only
    when it is not root. Bare, as root, it allows; in the sandbox (never root) the shell
    cannot find the program, so the guard blocks: the row must say DIFF and name it."""
    cache = tmp_path / "cache"
    tree = cache / "repos" / "made__up"
    (tree / ".cursor").mkdir(parents=True)
    guard = '[ "$(id -u)" = 0 ] || parity-no-such-tool || exit $?; echo "{}"'
    hooks = {"version": 1, "hooks": {"beforeShellExecution": [
        {"command": guard, "failClosed": True}]}}  # fmt: skip
    (tree / ".cursor" / "hooks.json").write_text(json.dumps(hooks))
    (cache / "MANIFEST.tsv").write_text(
        "name\trepo\tcommit\tlicense\thooks\nmade__up\tmade/up\t" + "0" * 40 + "\tMIT\tx\n"
    )
    payload = {
        "conversation_id": "conv-made__up", "generation_id": "gen-guard",
        "hook_event_name": "beforeShellExecution", "cursor_version": "1.7.52",
        "workspace_roots": ["{ROOT}"], "transcript_path": None,
        "command": "ls", "cwd": "{ROOT}",
    }  # fmt: skip
    recorded = {"hooks": [{"index": 0, "command": guard, "matched": True, "exit_code": 0,
                           "outcome": "ok"}], "answer": {}}  # fmt: skip
    cases = [{"name": "made__up", "repo": "made/up", "commit": "0" * 40,
              "layout": "as committed", "requires": [],
              "events": [{"id": "guard", "event": "beforeShellExecution", "fields": {},
                          "pre": None, "payload": payload, "note": "",
                          "expect_bare": recorded}]}]  # fmt: skip
    (cache / "cases.json").write_text(json.dumps(cases))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    env["CLOUDRUNNER_WORKER_ID"] = docker_tracker.worker_id
    proc = subprocess.run(
        [sys.executable, "-m", "bench.parity", str(cache), "--repeat", "0",
         "--out", str(tmp_path / "out")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    [verdict] = _events(tmp_path / "out")
    assert verdict["bare_confirms_recording"] is True
    assert verdict["answer_same"] is False
    assert verdict["details"]["answer"]["permission"] == "deny"
    assert verdict["exits_same"] is False and verdict["differing_hooks"] == [0]
    assert verdict["details"]["hooks"][0]["exit_code"] == 127
    assert "missing tool in the image: parity-no-such-tool" in verdict["causes"]
    assert "missing tool in the image: parity-no-such-tool" in proc.stdout
