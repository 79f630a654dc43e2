"""A repository's .cursor/environment.json: its image is built, its install runs once, and
project hooks run with the tools that environment has."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests.e2e.conftest import EXAMPLES, Deployment
from tests.support.git_repos import committed_repo, git

pytestmark = pytest.mark.docker

DOCKERFILE = """\
FROM cloudrunner/hook-runtime:latest
USER root
RUN printf '#!/bin/sh\\necho "{\\\\"additional_context\\\\": \\\\"env-tool-ok\\\\"}"\\n' \\
      > /usr/local/bin/env-tool && chmod 755 /usr/local/bin/env-tool
USER hook
"""


def _environment_repo(base: Path, install: str) -> Path:
    src = base / "env-src"
    shutil.copytree(EXAMPLES / "demo-repo", src)
    cursor = src / ".cursor"
    (cursor / "Dockerfile").write_text(DOCKERFILE)
    (cursor / "environment.json").write_text(
        json.dumps({"build": {"dockerfile": "Dockerfile", "context": "."}, "install": install})
    )
    hooks = json.loads((cursor / "hooks.json").read_text())
    hooks["hooks"]["postToolUse"] = [{"command": "env-tool"}]
    (cursor / "hooks.json").write_text(json.dumps(hooks))
    committed_repo(src, "with an environment")
    origin = base / "env-origin.git"
    git(base, "clone", "-q", "--bare", str(src), str(origin))
    return origin


@pytest.fixture
def environment_images(
    deployment: Deployment, docker_client: docker.DockerClient
) -> Iterator[None]:
    """Removes the environment images the test's worker built, pass or fail."""
    yield
    for image in docker_client.images.list(
        filters={"label": f"cloudrunner.worker={deployment.worker_id}"}
    ):
        docker_client.images.remove(image.id, force=True)


@pytest.mark.parametrize("deployment", ["session"], indirect=True)
@pytest.mark.usefixtures("environment_images")
def test_hooks_run_in_the_environment_image_after_one_install(deployment: Deployment) -> None:
    deployment.origin = _environment_repo(deployment.root, "echo installed >> .install-log")
    deployment.extra_env["CLOUDRUNNER_USE_ENVIRONMENT_JSON"] = "true"
    event = deployment.event("postToolUse", tool_name="Shell", tool_input={}, tool_output="")
    assert deployment.answer(event) == {"additional_context": "env-tool-ok"}
    assert deployment.answer(event) == {"additional_context": "env-tool-ok"}
    assert (deployment.workspace / ".install-log").read_text() == "installed\n"
    (environment,) = [r for r in deployment.records() if r["kind"] == "environment"]
    assert environment["outcome"] == "ok"
    hook = [r for r in deployment.records() if r["kind"] == "hook"][-1]
    assert hook["attestation"]["image"] == environment["image"]


@pytest.mark.parametrize("deployment", ["hook"], indirect=True)
@pytest.mark.usefixtures("environment_images")
def test_a_failing_install_fails_project_hooks_with_a_clear_reason(
    deployment: Deployment,
) -> None:
    deployment.origin = _environment_repo(deployment.root, "echo broken >&2; exit 3")
    deployment.extra_env["CLOUDRUNNER_USE_ENVIRONMENT_JSON"] = "true"
    # the guard is failClosed: it blocks, naming the install failure
    answer = deployment.answer(deployment.event("beforeShellExecution", command="rm -rf /"))
    assert answer["permission"] == "deny"
    assert "install command" in answer["agent_message"]
    hook = [r for r in deployment.records() if r["kind"] == "hook"][-1]
    assert hook["outcome"] == "sandbox_error"
    assert "exit 3" in hook["reason"]
