"""Fixtures shared by every test layer.

Docker fixtures live here (not in tests/integration) because both the integration and
the end-to-end tests need them. `docker_client` never skips under CI=true: a CI run with
no engine is a broken CI run, not a run with fewer tests.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import docker
import docker.errors
import pytest
import requests

from tests.support import packages
from tests.support.ci import check_ci_user, missing
from tests.support.docker_tracking import DockerTracker

RUNTIME_IMAGE = os.environ.get("CLOUDRUNNER_TEST_IMAGE", "cloudrunner/hook-runtime:latest")
#: the start of every test worker id: `.ci/run` exports a prefix of its own run, so its
#: final cleanup removes this run's containers and no one else's on the host
WORKER_ID_PREFIX = os.environ.get("CLOUDRUNNER_TEST_RUN") or "test"


def pytest_sessionstart(session: pytest.Session) -> None:
    check_ci_user()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that disturb the shared engine (stop dockerd) run after everything else."""
    items.sort(key=lambda item: item.get_closest_marker("disruptive") is not None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The release artefacts (tests/support/packages.py) start building as soon as a test
    that needs them is collected, in the background while the tests before it run."""
    if session.config.option.collectonly:
        return
    names = {item.path.name for item in session.items}
    if names & set(packages.USERS):
        packages.start_building(upgrade=bool(names & set(packages.UPGRADE_USERS)))


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        message = (
            f"no Docker engine answers ({exc}); run `bash scripts/docker-up` "
            "and `cloudrunner images build` first"
        )
        missing(message)
    try:
        client.images.get(RUNTIME_IMAGE)
    except docker.errors.ImageNotFound:
        message = f"image {RUNTIME_IMAGE} is missing; run `cloudrunner images build`"
        missing(message)
    yield client
    client.close()


@pytest.fixture
def docker_tracker(docker_client: docker.DockerClient) -> Iterator[DockerTracker]:
    """Tracks every container and network a test makes and removes them, pass or fail.

    Code under test labels what it creates with `cloudrunner.worker=<tracker.worker_id>`;
    anything else the test makes by hand it passes to `tracker.track(...)`.
    """
    tracker = DockerTracker(docker_client, worker_id=f"{WORKER_ID_PREFIX}-{uuid.uuid4().hex[:12]}")
    try:
        yield tracker
    finally:
        leftovers = tracker.cleanup()
    # Reported after cleanup so a leak fails the test that caused it without leaving anything.
    assert not leftovers, f"containers left running by the test were removed: {leftovers}"


@pytest.fixture
def runtime_image() -> str:
    return RUNTIME_IMAGE
