"""The Claude Code parity set end to end on repositories of the cache (real containers).

The cache holds third-party repositories and lives outside the project (`python -m
bench.parity.claude obtain`); without it this test skips. CLOUDRUNNER_PARITY_CACHE names it;
default `../parity-cache` next to the checkout (the Claude set lives in its `claude/`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
NAME = "Lukas-BAG__ClaudeWhitelistHook"
#: the repositories of the set whose hooks read their payload by path (`/dev/stdin`)
BY_PATH = ("oozoofrog__SwiftDemangle", "projetovanta__vanta")


def _cache() -> Path:
    return Path(os.environ.get("CLOUDRUNNER_PARITY_CACHE") or REPO.parent / "parity-cache")


def _run(cache: Path, names: tuple[str, ...], out: Path, worker: str) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    env["CLOUDRUNNER_WORKER_ID"] = worker
    only = [arg for name in names for arg in ("--only", name)]
    proc = subprocess.run(
        [sys.executable, "-m", "bench.parity.claude", "run", str(cache), *only, "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows: list[dict[str, Any]] = json.loads((out / "claude-parity.json").read_text())
    return rows


def test_a_repository_of_the_claude_set_answers_as_its_hooks_do_bare(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    cache = _cache()
    if not (cache / "claude" / "repos" / NAME).is_dir():
        pytest.skip(f"no Claude parity cache with {NAME} at {cache}: python -m "
                    "bench.parity.claude obtain (set CLOUDRUNNER_PARITY_CACHE)")  # fmt: skip
    rows = _run(cache, (NAME,), tmp_path / "out", docker_tracker.worker_id)
    assert len(rows) == 4
    for row in rows:
        assert row["same"] is True, row
        assert all("Claude Code PreToolUse hook" in h["reason"] for h in row["hooks"]), row
    assert not docker_tracker.labelled_containers()


def test_hooks_that_read_their_payload_by_path_answer_as_they_do_bare(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    """Issue 34: guards that read `/dev/stdin` by path refuse through cloudrunner what they
    refuse bare (a sandbox where the path cannot be opened lets these through)."""
    cache = _cache()
    missing = [n for n in BY_PATH if not (cache / "claude" / "repos" / n).is_dir()]
    if missing:
        pytest.skip(f"no Claude parity cache with {', '.join(missing)} at {cache}: python -m "
                    "bench.parity.claude obtain (set CLOUDRUNNER_PARITY_CACHE)")  # fmt: skip
    rows = _run(cache, BY_PATH, tmp_path / "out", docker_tracker.worker_id)
    assert len(rows) == 6
    assert sum(1 for r in rows if r["bare"]["decision"] == "deny") == 3
    for row in rows:
        assert row["same"] is True, row
    assert not docker_tracker.labelled_containers()
