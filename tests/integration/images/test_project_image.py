"""Building a repository's environment image on the real engine, from a real clone."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from cloudrunner import workspace as ws
from cloudrunner.images import BASE_IMAGE, BUILD_KEY_LABEL
from cloudrunner.images import project_image as env
from cloudrunner.images.project_image import EnvironmentBuildError
from tests.support.docker_tracking import WORKER_LABEL, DockerTracker
from tests.support.git_repos import committed_repo

pytestmark = pytest.mark.docker

DOCKERFILE = f"""FROM {BASE_IMAGE}
COPY tools/hello /usr/local/bin/hello
RUN chmod 0755 /usr/local/bin/hello
"""


def make_upstream(root: Path, dockerfile: str, hello: str = "hello from the environment") -> Path:
    """A repository whose cloud environment adds a `hello` tool to the base image."""
    root.mkdir()
    (root / ".cursor").mkdir()
    (root / ".cursor" / "environment.json").write_text(
        json.dumps(
            {
                "build": {"dockerfile": "Dockerfile", "context": ".."},
                "install": "echo installed > .cursor/install-ran",
            }
        )
    )
    (root / ".cursor" / "Dockerfile").write_text(dockerfile)
    (root / "tools").mkdir()
    (root / "tools" / "hello").write_text(f"#!/bin/sh\necho '{hello}'\n")
    committed_repo(root, "environment")
    return root


@pytest.fixture
def own_images(
    docker_client: docker.DockerClient, docker_tracker: DockerTracker
) -> Iterator[dict[str, str]]:
    """Labels for the images a test builds; every image carrying them is removed after."""
    labels = dict(docker_tracker.labels)
    yield labels
    selector = f"{WORKER_LABEL}={docker_tracker.worker_id}"
    for image in docker_client.images.list(filters={"label": selector}):
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(image.id, force=True)


def cloned_environment(tmp_path: Path, dockerfile: str) -> env.ProjectEnvironment:
    upstream = make_upstream(tmp_path / "upstream", dockerfile)
    workspace = ws.clone(str(upstream), tmp_path / "work")
    found = env.load_environment(workspace.root)
    assert found is not None
    return found


def run_in(
    client: docker.DockerClient,
    tracker: DockerTracker,
    image: str,
    argv: list[str],
    **kwargs: object,
) -> tuple[int, str]:
    container = client.containers.create(image, argv, labels=tracker.labels, **kwargs)
    tracker.track(container)
    container.start()
    code = int(container.wait(timeout=120)["StatusCode"])
    return code, container.logs().decode()


def test_build_reuse_and_rebuild_on_change(
    tmp_path: Path,
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
    own_images: dict[str, str],
) -> None:
    found = cloned_environment(tmp_path, DOCKERFILE)
    first = env.build_image(docker_client, found, labels=own_images)
    assert first.built
    image = docker_client.images.get(first.tag)
    assert image.id == first.image_id
    assert image.labels[BUILD_KEY_LABEL] == first.key
    assert image.labels[env.KIND_LABEL] == env.KIND_VALUE
    assert image.labels[WORKER_LABEL] == docker_tracker.worker_id
    code, out = run_in(docker_client, docker_tracker, first.tag, ["hello"])
    assert (code, out.strip()) == (0, "hello from the environment")

    again = env.build_image(docker_client, found, labels=own_images)
    assert not again.built
    assert (again.image_id, again.key) == (first.image_id, first.key)

    (found.workspace_root / "tools" / "hello").write_text("#!/bin/sh\necho changed\n")
    changed = env.build_image(docker_client, found, labels=own_images)
    assert changed.built and changed.key != first.key
    code, out = run_in(docker_client, docker_tracker, changed.tag, ["hello"])
    assert out.strip() == "changed"


def test_install_command_runs_in_the_built_image_against_the_workspace(
    tmp_path: Path,
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
    own_images: dict[str, str],
) -> None:
    """The contract the runner relies on: install_argv() in the image, cwd = workspace."""
    found = cloned_environment(tmp_path, DOCKERFILE)
    image = env.build_image(docker_client, found, labels=own_images)
    argv = found.install_argv()
    assert argv is not None
    root = str(found.workspace_root)
    code, out = run_in(
        docker_client,
        docker_tracker,
        image.tag,
        argv,
        working_dir=root,
        volumes={root: {"bind": root, "mode": "rw"}},
        network_mode="none",
    )
    assert code == 0, out
    assert (found.workspace_root / ".cursor" / "install-ran").read_text() == "installed\n"


def test_failing_step_is_a_clear_error_and_tags_nothing(
    tmp_path: Path, docker_client: docker.DockerClient, own_images: dict[str, str]
) -> None:
    found = cloned_environment(tmp_path, f"FROM {BASE_IMAGE}\nRUN echo broken >&2; exit 3\n")
    with pytest.raises(EnvironmentBuildError) as info:
        env.build_image(docker_client, found, labels=own_images)
    message = info.value.message
    assert "RUN echo broken" in message
    assert "nothing was tagged" in message
    assert "\n" not in message
    key = env.build_key(
        env.resolve_build(found), {BASE_IMAGE: docker_client.images.get(BASE_IMAGE).id}
    )
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(env.image_tag(key))


def test_missing_base_image_is_named_without_a_pull(
    tmp_path: Path, docker_client: docker.DockerClient, own_images: dict[str, str]
) -> None:
    found = cloned_environment(tmp_path, "FROM cloudrunner/no-such-base:never\nRUN true\n")
    with pytest.raises(EnvironmentBuildError, match=r"cloudrunner/no-such-base:never .* not in"):
        env.build_image(docker_client, found, labels=own_images)
