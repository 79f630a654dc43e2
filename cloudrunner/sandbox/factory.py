"""Opening the sandbox a profile asks for."""

from __future__ import annotations

import docker

from cloudrunner.sandbox import engine
from cloudrunner.sandbox.base import Sandbox, SandboxSpec
from cloudrunner.sandbox.hook_container import HookContainerSandbox
from cloudrunner.sandbox.session_sandbox import SessionSandbox


def open_sandbox(
    spec: SandboxSpec,
    client: docker.DockerClient | engine.EngineLink | None = None,
) -> Sandbox:
    """A `hook` or `session` sandbox as `spec.profile.isolation` says.

    Raises SandboxConfigError for a spec that cannot work (a workspace that does not
    exist); everything that goes wrong later is a run's sandbox_error.
    """
    if spec.profile.isolation == "hook":
        return HookContainerSandbox(spec, client)
    return SessionSandbox(spec, client)
