"""The shell examples the README and the docs mark as runnable (`<!-- example: NAME -->`
before a ```sh block, see tests/support/doc_examples.py) run as they are, in order per file
and name, against the demo repository, through real containers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.doc_examples import ROOT, examples
from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker


def test_the_readme_has_a_runnable_tour() -> None:
    tour = examples().get("README.md:tour", "")
    for command in ("validate", "serve", "hook", "audit", "replay"):
        assert f"cloudrunner {command}" in tour


@pytest.mark.parametrize("key", sorted(examples()))
def test_marked_examples_run(key: str, tmp_path: Path, docker_tracker: DockerTracker) -> None:
    script = "set -euo pipefail\n" + examples()[key]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")},
        "CLOUDRUNNER_WORKER_ID": docker_tracker.worker_id,
        "TMPDIR": str(tmp_path),  # mktemp -d lands here, and goes with the test
    }
    proc = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"{key} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
