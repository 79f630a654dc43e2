"""The Claude Code parity set end to end on one repository of the cache (real containers).

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

import pytest

from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
NAME = "Lukas-BAG__ClaudeWhitelistHook"


def test_a_repository_of_the_claude_set_answers_as_its_hooks_do_bare(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    cache = Path(os.environ.get("CLOUDRUNNER_PARITY_CACHE") or REPO.parent / "parity-cache")
    if not (cache / "claude" / "repos" / NAME).is_dir():
        pytest.skip(f"no Claude parity cache with {NAME} at {cache}: python -m "
                    "bench.parity.claude obtain (set CLOUDRUNNER_PARITY_CACHE)")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    env["CLOUDRUNNER_WORKER_ID"] = docker_tracker.worker_id
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.parity.claude", "run", str(cache), "--only", NAME,
         "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads((out / "claude-parity.json").read_text())
    assert len(rows) == 4
    for row in rows:
        assert row["same"] is True, row
        assert all("Claude Code PreToolUse hook" in h["reason"] for h in row["hooks"]), row
    assert not docker_tracker.labelled_containers()
