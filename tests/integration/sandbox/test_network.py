"""Network access, tested only against a server on a network this test creates."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox import ExecRequest
from tests.integration.sandbox.conftest import SandboxFactory
from tests.support.docker_tracking import DockerTracker
from tests.support.waiting import sample_until

pytestmark = pytest.mark.docker


@pytest.fixture
def test_network(
    docker_client: docker.DockerClient, docker_tracker: DockerTracker, runtime_image: str
) -> Iterator[tuple[str, str]]:
    """(network name, server address): an internal network with a tiny HTTP server on it."""
    name = f"cloudrunner-test-{uuid.uuid4().hex[:10]}"
    docker_tracker.track(
        docker_client.networks.create(name, internal=True, labels=docker_tracker.labels)
    )
    server = docker_tracker.track(
        docker_client.containers.run(
            runtime_image,
            [
                "python3",
                "-c",
                "import http.server as h; h.test(h.SimpleHTTPRequestHandler, "
                "port=8080, bind='0.0.0.0')",
            ],
            detach=True,
            network=name,
            working_dir="/tmp",
        )
    )

    def server_address() -> str:
        server.reload()
        return str(server.attrs["NetworkSettings"]["Networks"][name]["IPAddress"] or "")

    address = sample_until(server_address, bool, timeout_s=30, interval_s=0.1)
    assert address
    # The tracker removes the server and then the network, after the sandboxes are closed.
    yield name, address


def _fetch(address: str) -> str:
    # Retried for a while: the server may still be starting on a loaded machine.
    return (
        f"for i in $(seq 1 30); do curl -s -o /dev/null -w '%{{http_code}}' --max-time 2 "
        f"http://{address}:8080/ && exit 0; sleep 1; done; echo unreachable; exit 1"
    )


def test_a_project_hook_cannot_reach_a_server_on_the_network(
    make_sandbox: SandboxFactory,
    isolation: str,
    runtime: str,
    workspace: Path,
    test_network: tuple[str, str],
) -> None:
    _, address = test_network
    sandbox = make_sandbox(isolation, runtime)
    probe = f"curl -s --max-time 3 http://{address}:8080/ && echo reached; echo rc=$?"
    result = sandbox.run(ExecRequest(probe, str(workspace), timeout_s=60))
    assert "reached" not in result.stdout.decode()
    assert result.stdout.decode().strip() == "rc=7"  # curl: could not connect


def test_a_team_source_given_the_network_reaches_it(
    make_sandbox: SandboxFactory,
    isolation: str,
    workspace: Path,
    test_network: tuple[str, str],
) -> None:
    # The positive control: the same probe succeeds where the operator allows the network.
    name, address = test_network
    sandbox = make_sandbox(isolation, "runc", network=name, source="team")
    result = sandbox.run(ExecRequest(_fetch(address), str(workspace), timeout_s=90))
    assert result.outcome is Outcome.OK, (result.message, result.stdout, result.stderr)
    assert result.stdout.decode().startswith("200")
    assert result.attestation["network"] == name
