"""Reaching the Docker engine through the docker SDK, with errors that name the fix."""

from __future__ import annotations

import docker
import docker.errors

from cloudrunner.errors import CloudrunnerError


class EngineUnavailable(CloudrunnerError):
    """No Docker engine answers."""


def connect(timeout: float = 30.0) -> docker.DockerClient:
    """A client for the engine named by DOCKER_HOST (default: the local unix socket).

    Raises EngineUnavailable, naming the fix, when no engine answers: never a fallback.
    """
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except docker.errors.DockerException as exc:
        raise EngineUnavailable(
            "no Docker engine answers "
            f"({_short(exc)}); start one with `bash scripts/docker-up` "
            "or point DOCKER_HOST at a running engine"
        ) from exc
    return client


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
