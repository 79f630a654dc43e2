"""The reaper removes containers of a worker that is gone, and nothing else."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import docker
import pytest

from cloudrunner import cli
from cloudrunner.sandbox import ExecRequest, SessionSandbox, reaper
from cloudrunner.sandbox.base import HOST_LABEL, PID_LABEL, PROCESS_START_LABEL, WORKER_LABEL
from tests.integration.sandbox.conftest import SandboxFactory
from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _orphan(client: docker.DockerClient, tracker: DockerTracker, image: str) -> str:
    """A stopped container labelled as made by a worker process that has exited."""
    labels = {
        WORKER_LABEL: tracker.worker_id,
        HOST_LABEL: socket.gethostname(),
        PID_LABEL: str(_dead_pid()),
        PROCESS_START_LABEL: "1",
    }
    container = client.containers.create(image, ["true"], labels=labels)
    tracker.track(container)
    return str(container.id)[:12]


def test_containers_of_a_gone_worker_are_reaped_and_live_ones_kept(
    make_sandbox: SandboxFactory,
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
    runtime_image: str,
    workspace: Path,
) -> None:
    orphan = _orphan(docker_client, docker_tracker, runtime_image)
    live = make_sandbox("session")
    assert isinstance(live, SessionSandbox)
    live.run(ExecRequest("true", str(workspace), timeout_s=60))
    found = reaper.find_orphans(docker_client, worker=docker_tracker.worker_id)
    assert [o.container_id for o in found] == [orphan]
    assert "is gone" in found[0].reason
    removed = reaper.reap(docker_client, worker=docker_tracker.worker_id)
    assert [o.container_id for o in removed] == [orphan]
    remaining = {c.id[:12] for c in docker_tracker.labelled_containers()}
    assert orphan not in remaining
    assert live.container_id is not None and live.container_id[:12] in remaining


def test_this_process_is_never_reaped_but_a_gone_one_with_the_same_id_is(
    docker_client: docker.DockerClient, docker_tracker: DockerTracker, runtime_image: str
) -> None:
    """Processes share a worker id (one `cloudrunner run` per event): the id alone does not
    keep a container; its process being alive does."""
    import os

    from cloudrunner.sandbox.plan import process_start

    gone = _orphan(docker_client, docker_tracker, runtime_image)
    mine = docker_client.containers.create(
        runtime_image,
        ["true"],
        labels={
            WORKER_LABEL: docker_tracker.worker_id,
            HOST_LABEL: socket.gethostname(),
            PID_LABEL: str(os.getpid()),
            PROCESS_START_LABEL: process_start(os.getpid()),
        },
    )
    docker_tracker.track(mine)
    found = reaper.find_orphans(
        docker_client, worker=docker_tracker.worker_id, current_worker=docker_tracker.worker_id
    )
    assert [o.container_id for o in found] == [gone]


def test_prune_command_lists_then_removes(
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
    runtime_image: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    orphan = _orphan(docker_client, docker_tracker, runtime_image)
    worker = docker_tracker.worker_id
    assert cli.main(["sandbox", "prune", "--worker", worker, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would remove\t{orphan}" in out
    assert orphan in {c.id[:12] for c in docker_tracker.labelled_containers()}
    assert cli.main(["sandbox", "prune", "--worker", worker]) == 0
    assert "removed 1 container(s)" in capsys.readouterr().out
    assert docker_tracker.labelled_containers() == []
