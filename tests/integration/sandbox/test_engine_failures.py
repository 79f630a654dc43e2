"""A missing image, a missing runtime and an engine that does not answer: each is a
sandbox_error whose message names the fix, never an exception or a fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox import ExecRequest
from cloudrunner.sandbox.engine import EngineLink
from tests.integration.sandbox.conftest import SandboxFactory
from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker


def test_a_missing_image_names_images_build(
    make_sandbox: SandboxFactory, isolation: str, workspace: Path, docker_tracker: DockerTracker
) -> None:
    sandbox = make_sandbox(isolation, image="cloudrunner/no-such-image:never")
    result = sandbox.run(ExecRequest("true", str(workspace), timeout_s=60))
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert "cloudrunner/no-such-image:never" in result.message
    assert "`cloudrunner images build`" in result.message
    assert docker_tracker.labelled_containers() == []


def test_a_missing_runtime_names_docker_up(
    make_sandbox: SandboxFactory, isolation: str, workspace: Path, docker_tracker: DockerTracker
) -> None:
    sandbox = make_sandbox(isolation, runtime="cloudrunner-absent-runtime")
    result = sandbox.run(ExecRequest("true", str(workspace), timeout_s=60))
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert "no runtime named 'cloudrunner-absent-runtime'" in result.message
    assert "`bash scripts/docker-up`" in result.message
    assert docker_tracker.labelled_containers() == []


def test_an_engine_that_does_not_answer_names_docker_up(
    make_sandbox: SandboxFactory,
    isolation: str,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A real client pointed at a socket with no engine behind it (dockerd is shared and
    # must not be stopped): the same failure a stopped engine gives.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    sandbox = make_sandbox(isolation, client=EngineLink(None))
    result = sandbox.run(ExecRequest("true", str(workspace), timeout_s=60))
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert "engine answers" in result.message or "does not answer" in result.message
    assert "`bash scripts/docker-up`" in result.message
    sandbox.close()  # closing without an engine is quiet too


def test_gvisor_with_a_network_is_refused_rather_than_silently_offline(
    make_sandbox: SandboxFactory, isolation: str, workspace: Path, runtime: str
) -> None:
    if runtime != "runsc":
        pytest.skip("only runsc is registered with --network=none")
    sandbox = make_sandbox(isolation, runtime, network="bridge", source="team")
    result = sandbox.run(ExecRequest("true", str(workspace), timeout_s=60))
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert "--network=none" in result.message
