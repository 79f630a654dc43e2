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


def _orphan(
    client: docker.DockerClient,
    tracker: DockerTracker,
    image: str,
    *,
    worker: str | None = None,
    host: str | None = None,
) -> str:
    """A stopped container labelled as made by a worker process that has exited (of the
    tracker's worker, or of `worker`, on this host or `host`); removed at teardown."""
    labels = {
        WORKER_LABEL: worker or tracker.worker_id,
        HOST_LABEL: host or socket.gethostname(),
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

    from cloudrunner.sandbox.container_plan import process_start

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
    found = reaper.find_orphans(docker_client, current_worker=docker_tracker.worker_id)
    assert [o.container_id for o in found] == [gone]
    found = reaper.find_orphans(docker_client, worker=docker_tracker.worker_id)
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
    assert f"removed 1 container(s) of worker {worker}" in capsys.readouterr().out
    assert docker_tracker.labelled_containers() == []


def _present(client: docker.DockerClient, short_id: str) -> bool:
    try:
        client.containers.get(short_id)
    except docker.errors.NotFound:
        return False
    return True


def test_a_starting_worker_reaps_only_its_own_gone_containers_on_this_host(
    docker_client: docker.DockerClient, docker_tracker: DockerTracker, runtime_image: str
) -> None:
    """Another worker's orphan (a concurrent test run, a second worker on the host) and the
    worker's own containers from another host are not a starting worker's to remove."""
    me = docker_tracker.worker_id
    mine = _orphan(docker_client, docker_tracker, runtime_image)
    other = _orphan(docker_client, docker_tracker, runtime_image, worker=f"{me}-other")
    elsewhere = _orphan(docker_client, docker_tracker, runtime_image, host="another-host.invalid")
    removed = reaper.reap(docker_client, current_worker=me)
    assert [o.container_id for o in removed] == [mine]
    assert not _present(docker_client, mine)
    assert _present(docker_client, other) and _present(docker_client, elsewhere)
    # The other worker, starting again, reaps its own.
    assert [o.container_id for o in reaper.reap(docker_client, current_worker=f"{me}-other")] == [
        other
    ]
    assert _present(docker_client, elsewhere)


def test_prune_defaults_to_the_configured_worker_and_names_others_explicitly(
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
    runtime_image: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    me = docker_tracker.worker_id
    mine = _orphan(docker_client, docker_tracker, runtime_image)
    other = _orphan(docker_client, docker_tracker, runtime_image, worker=f"{me}-other")
    elsewhere = _orphan(
        docker_client, docker_tracker, runtime_image, worker=f"{me}-other", host="h2.invalid"
    )
    monkeypatch.setenv("CLOUDRUNNER_WORKER_ID", me)
    monkeypatch.delenv("CLOUDRUNNER_CONFIG", raising=False)
    assert cli.main(["sandbox", "prune"]) == 0
    out = capsys.readouterr().out
    assert f"removed\t{mine}" in out and other not in out
    assert f"removed 1 container(s) of worker {me} on this host" in out
    assert _present(docker_client, other)
    # Every worker on this host: listed (dry run: the shared engine holds others' too).
    assert cli.main(["sandbox", "prune", "--all-workers", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would remove\t{other}" in out and elsewhere not in out
    assert _present(docker_client, other)
    # Named explicitly: that worker's, from this host and another one.
    assert cli.main(["sandbox", "prune", "--worker", f"{me}-other"]) == 0
    out = capsys.readouterr().out
    assert f"removed\t{other}" in out and f"removed\t{elsewhere}" in out
    assert "was named as gone" in out
    assert not _present(docker_client, other) and not _present(docker_client, elsewhere)


def test_prune_refuses_two_selections_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["sandbox", "prune", "--worker", "w", "--all-workers"])
    assert caught.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
