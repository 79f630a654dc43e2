"""The README's main command, minus the setup it runs first: the demo end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker

DEMO = Path(__file__).resolve().parents[2] / "examples" / "run_demo.py"


def test_demo_runs_the_whole_path_and_verifies_the_chain(docker_tracker: DockerTracker) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    env["CLOUDRUNNER_WORKER_ID"] = docker_tracker.worker_id
    proc = subprocess.run(
        [sys.executable, str(DEMO)], capture_output=True, text=True, env=env, timeout=600
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "credential; remove it first" in out
    assert "Blocked by the project guard" in out
    assert "src/app.py after the formatter: 'def greet(name):\\n" in out
    assert out.count("followup_message") == 2
    assert "not available in the cloud profile" in out
    assert "gated: the gate is held closed" in out
    assert "audit log OK" in out
