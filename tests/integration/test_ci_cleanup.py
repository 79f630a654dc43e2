"""`.ci/run`'s final cleanup removes the containers of its own run only (its test worker ids
start with the run's prefix), never those of another run or worker on the same host."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import docker
import docker.errors
import pytest

from tests.support.docker_tracking import WORKER_LABEL, DockerTracker

pytestmark = pytest.mark.docker

CI_RUN = Path(__file__).resolve().parents[2] / ".ci" / "run"


def _cleanup_function() -> str:
    lines = CI_RUN.read_text().splitlines()
    start = lines.index("cleanup() {")
    end = lines.index("}", start)
    return "\n".join(lines[start : end + 1])


def test_the_ci_cleanup_removes_only_this_runs_containers(
    docker_client: docker.DockerClient, docker_tracker: DockerTracker, runtime_image: str
) -> None:
    run = docker_tracker.worker_id  # stands for this CI run's prefix
    owners = {
        "this run": f"{run}-0123456789ab",
        "longer prefix": f"{run}x-0123456789ab",
        "another run": f"other-{run}-0123456789ab",
    }
    made = {
        what: str(
            docker_tracker.track(
                docker_client.containers.create(runtime_image, ["true"], labels={WORKER_LABEL: who})
            ).id
        )
        for what, who in owners.items()
    }
    proc = subprocess.run(
        ["bash", "-c", _cleanup_function() + "\ncleanup"],
        env={**os.environ, "CLOUDRUNNER_TEST_RUN": run},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert made["this run"][:12] in proc.stderr
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(made["this run"])
    for what in ("longer prefix", "another run"):
        docker_client.containers.get(made[what])  # still there


def test_test_worker_ids_start_with_the_runs_prefix(docker_tracker: DockerTracker) -> None:
    prefix = os.environ.get("CLOUDRUNNER_TEST_RUN") or "test"
    assert docker_tracker.worker_id.startswith(prefix + "-")
    assert "CLOUDRUNNER_TEST_RUN=" in CI_RUN.read_text()
    assert "export CLOUDRUNNER_TEST_RUN" in CI_RUN.read_text()
