from __future__ import annotations

import docker
import docker.errors
import pytest

from cloudrunner.docker_engine import EngineUnavailable
from cloudrunner.sandbox import engine


def _down() -> docker.DockerClient:
    raise docker.errors.DockerException("Error while fetching server API version")


def test_an_engine_that_does_not_answer_names_docker_up() -> None:
    link = engine.EngineLink(_down)
    with pytest.raises(EngineUnavailable, match=r"bash scripts/docker-up"):
        link.client()


@pytest.mark.parametrize(
    ("exc", "runtime", "needle"),
    [
        (docker.errors.ImageNotFound("No such image: img:1"), "runc", "cloudrunner images build"),
        (
            docker.errors.APIError("Unknown runtime specified runsc"),
            "runsc",
            "bash scripts/docker-up",
        ),
        (docker.errors.APIError("network team-net not found"), "runc", "docker network create"),
        (ConnectionError("connection refused"), "runc", "bash scripts/docker-up"),
    ],
)
def test_docker_errors_name_their_fix(exc: Exception, runtime: str, needle: str) -> None:
    message = engine.describe(exc, image="img:1", runtime=runtime, network="team-net")
    assert needle in message
