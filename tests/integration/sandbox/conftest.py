"""Fixtures for the sandbox integration tests: real engine, real containers, both runtimes."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from cloudrunner.sandbox import (
    HookContainerSandbox,
    SandboxLabels,
    SandboxProfile,
    SandboxSpec,
    SessionSandbox,
)
from tests.support.ci import missing
from tests.support.docker_tracking import DockerTracker

#: the uid:gid the test workspaces are owned by, so hooks run as it
WORKSPACE_UID = 1000

SandboxFactory = Callable[..., HookContainerSandbox | SessionSandbox]


@pytest.fixture(params=["runc", "runsc"])
def runtime(request: pytest.FixtureRequest, docker_client: docker.DockerClient) -> str:
    name = str(request.param)
    if name == "runsc" and "runsc" not in (docker_client.info().get("Runtimes") or {}):
        message = "the engine has no runsc runtime; `bash scripts/docker-up` registers it"
        missing(message)
    return name


@pytest.fixture(params=["hook", "session"])
def isolation(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README").write_text("workspace file\n")
    if os.geteuid() == 0:
        os.chown(ws, WORKSPACE_UID, WORKSPACE_UID)
    return ws


@pytest.fixture
def make_sandbox(
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
    workspace: Path,
    runtime_image: str,
) -> Iterator[SandboxFactory]:
    opened: list[HookContainerSandbox | SessionSandbox] = []

    def make(
        isolation: str,
        runtime: str = "runc",
        *,
        config_dirs: tuple[Path, ...] = (),
        workspace_path: Path | None = None,
        source: str = "project",
        client: Any = None,
        wedge_grace_s: float = 20.0,
        agent_dir: Path | None = None,
        start_timeout_s: float = 60.0,
        session_class: type[SessionSandbox] = SessionSandbox,
        **profile: Any,
    ) -> HookContainerSandbox | SessionSandbox:
        spec = SandboxSpec(
            workspace_path or workspace,
            SandboxLabels(docker_tracker.worker_id, f"s-{uuid.uuid4().hex[:8]}", source),
            SandboxProfile.model_validate(
                {"image": runtime_image, "runtime": runtime, "isolation": isolation, **profile}
            ),
            config_dirs=config_dirs,
            agent_dir=agent_dir,
        )
        engine = docker_client if client is None else client
        sandbox: HookContainerSandbox | SessionSandbox
        if isolation == "hook":
            sandbox = HookContainerSandbox(spec, engine)
        else:
            sandbox = session_class(
                spec, engine, wedge_grace_s=wedge_grace_s, start_timeout_s=start_timeout_s
            )
        opened.append(sandbox)
        return sandbox

    try:
        yield make
    finally:
        for sandbox in opened:
            sandbox.close()
