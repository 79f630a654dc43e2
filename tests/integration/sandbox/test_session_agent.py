"""Session isolation specifics: the warm agent survives hostile hooks, hooks do not
outlive their request, concurrent runs, and a dead or wedged agent is replaced."""

from __future__ import annotations

import io
import tarfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox import (
    ExecRequest,
    ExecResult,
    SandboxLabels,
    SandboxProfile,
    SandboxSpec,
    SessionPool,
    SessionSandbox,
)
from tests.integration.sandbox.conftest import SandboxFactory
from tests.integration.sandbox.test_hostile_hooks import hook_processes, next_hook_runs
from tests.support.ci import missing
from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker

BASE_IMAGE_WITHOUT_PYTHON = "cloudrunner/base:bookworm"


def session(make_sandbox: SandboxFactory, runtime: str = "runc", **kw: object) -> SessionSandbox:
    sandbox = make_sandbox("session", runtime, **kw)
    assert isinstance(sandbox, SessionSandbox)
    return sandbox


def test_kill_minus_one_cannot_touch_the_agent(
    make_sandbox: SandboxFactory, runtime: str, workspace: Path
) -> None:
    sandbox = session(make_sandbox, runtime)
    first = sandbox.run(
        ExecRequest("kill -9 -1; kill -9 1; echo after", str(workspace), timeout_s=60)
    )
    assert first.outcome in (Outcome.OK, Outcome.ERROR)
    second = sandbox.run(ExecRequest("echo next", str(workspace), timeout_s=60))
    assert second.outcome is Outcome.OK
    assert second.sandbox_id == first.sandbox_id  # the same agent answered


def test_background_processes_do_not_outlive_their_request(
    make_sandbox: SandboxFactory, runtime: str, workspace: Path
) -> None:
    sandbox = session(make_sandbox, runtime)
    leave_behind = (
        "sleep 300 & setsid sleep 301 & (sleep 302 &); "
        "nohup sh -c 'sleep 303' >/dev/null 2>&1 & echo started"
    )
    result = sandbox.run(ExecRequest(leave_behind, str(workspace), timeout_s=60))
    assert result.outcome is Outcome.OK
    assert result.stdout == b"started\n"
    assert hook_processes(sandbox, workspace) == []


def test_concurrent_runs_each_get_their_own_answer(
    make_sandbox: SandboxFactory, runtime: str, workspace: Path
) -> None:
    sandbox = session(make_sandbox, runtime)
    results: dict[int, ExecResult] = {}

    def run(i: int) -> None:
        command = "sleep 2; cat" if i == 0 else "cat"
        request = ExecRequest(command, str(workspace), f"payload-{i}".encode(), {}, 120)
        results[i] = sandbox.run(request)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert sorted(results) == list(range(8))
    for i, result in results.items():
        assert result.outcome is Outcome.OK, result.message
        assert result.stdout == f"payload-{i}".encode()
    assert len({r.sandbox_id for r in results.values()}) == 1


def test_a_container_that_dies_fails_the_hooks_in_flight_and_is_replaced(
    make_sandbox: SandboxFactory,
    runtime: str,
    workspace: Path,
    docker_client: docker.DockerClient,
) -> None:
    sandbox = session(make_sandbox, runtime)
    next_hook_runs(sandbox, workspace)
    old = sandbox.container_id
    assert old is not None
    in_flight: list[ExecResult] = []
    runner = threading.Thread(
        target=lambda: in_flight.append(
            sandbox.run(ExecRequest("sleep 120", str(workspace), timeout_s=150))
        )
    )
    runner.start()
    # Wait until the hook is running in the container, then kill the container under it.
    probe = "pgrep -x sleep >/dev/null"
    for _ in range(600):
        exec_id = docker_client.api.exec_create(old, ["sh", "-c", probe], user="0")
        docker_client.api.exec_start(exec_id)
        if docker_client.api.exec_inspect(exec_id)["ExitCode"] == 0:
            break
    docker_client.api.kill(old)
    runner.join(120)
    assert in_flight and in_flight[0].outcome is Outcome.SANDBOX_ERROR
    assert "replaced" in in_flight[0].message
    next_hook_runs(sandbox, workspace)
    assert sandbox.container_id not in (None, old)
    with pytest.raises(docker.errors.NotFound):
        docker_client.api.inspect_container(old)


def test_a_wedged_agent_is_detected_and_replaced(
    make_sandbox: SandboxFactory, workspace: Path, docker_client: docker.DockerClient
) -> None:
    sandbox = session(make_sandbox, "runc", wedge_grace_s=3.0)
    next_hook_runs(sandbox, workspace)
    old = sandbox.container_id
    assert old is not None
    docker_client.api.pause(old)  # the agent stops answering, the container stays up
    result = sandbox.run(ExecRequest("echo hi", str(workspace), timeout_s=1))
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert "wedged" in result.message
    next_hook_runs(sandbox, workspace)
    assert sandbox.container_id not in (None, old)


@pytest.fixture
def base_image(docker_client: docker.DockerClient) -> str:
    """The local Debian base, which has no python3 (`cloudrunner images build` makes it)."""
    try:
        docker_client.images.get(BASE_IMAGE_WITHOUT_PYTHON)
    except docker.errors.ImageNotFound:
        missing(f"{BASE_IMAGE_WITHOUT_PYTHON} is missing; run `cloudrunner images build`")
    return BASE_IMAGE_WITHOUT_PYTHON


def test_an_image_without_python_says_so_and_can_fall_back_explicitly(
    make_sandbox: SandboxFactory, runtime: str, workspace: Path, base_image: str
) -> None:
    strict = session(make_sandbox, runtime, image=base_image)
    refused = strict.run(ExecRequest("echo hi", str(workspace), timeout_s=60))
    assert refused.outcome is Outcome.SANDBOX_ERROR
    assert "has no python3" in refused.message
    assert 'isolation to "hook"' in refused.message

    lenient = session(make_sandbox, runtime, image=base_image, fallback_to_hook=True)
    ran = lenient.run(ExecRequest("echo hi", str(workspace), timeout_s=60))
    assert ran.outcome is Outcome.OK, ran.message
    assert ran.stdout == b"hi\n"
    assert ran.attestation["isolation"] == "hook"
    assert ran.attestation["fallback_from"] == "session"
    assert "ran in hook isolation" in ran.message


@pytest.fixture
def image_with_broken_python(docker_client: docker.DockerClient, base_image: str) -> Iterator[str]:
    """An image whose python3 prints one line and exits 3 (built offline: COPY only)."""
    tag = f"cloudrunner-test/broken-python:{uuid.uuid4().hex[:12]}"
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, text, mode in (
            ("Dockerfile", f"FROM {base_image}\nCOPY python3 /usr/bin/python3\n",
             0o644),
            ("python3", "#!/bin/sh\necho 'python3: broken on purpose' >&2\nexit 3\n", 0o755),
        ):  # fmt: skip
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    docker_client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True)
    try:
        yield tag
    finally:
        docker_client.images.remove(tag, force=True)


def test_an_agent_that_exits_at_once_is_reported_as_such_not_as_a_timeout(
    make_sandbox: SandboxFactory, runtime: str, workspace: Path, image_with_broken_python: str
) -> None:
    broken = session(make_sandbox, runtime, image=image_with_broken_python)
    refused = broken.run(ExecRequest("echo hi", str(workspace), timeout_s=60))
    assert refused.outcome is Outcome.SANDBOX_ERROR
    assert "the session agent exited (exit 3) before it said hello" in refused.message
    assert "python3: broken on purpose" in refused.message
    assert "within" not in refused.message


def test_the_pool_keeps_one_sandbox_per_session_and_source(
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
    workspace: Path,
    runtime_image: str,
) -> None:
    def spec(session_id: str, source: str, memory: str = "256MiB") -> SandboxSpec:
        return SandboxSpec(
            workspace,
            SandboxLabels(docker_tracker.worker_id, session_id, source),
            SandboxProfile.model_validate({"image": runtime_image, "limits": {"memory": memory}}),
        )

    with SessionPool(docker_client) as pool:
        a = pool.get(spec("s1", "project"))
        assert pool.get(spec("s1", "project")) is a
        b = pool.get(spec("s1", "team"))
        assert b is not a
        for sandbox in (a, b):
            assert sandbox.run(ExecRequest("true", str(workspace), timeout_s=60)).outcome is (
                Outcome.OK
            )
        assert len(docker_tracker.labelled_containers()) == 2
        changed = pool.get(spec("s1", "project", memory="300MiB"))
        assert changed is not a  # a reloaded profile never runs in the stale container
        assert a.container_id is None
        assert pool.close_session("s1") == 2
        assert docker_tracker.labelled_containers() == []
