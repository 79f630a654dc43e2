"""The hook runtime image, as built by `cloudrunner images build`, run for real."""

from __future__ import annotations

import docker
import docker.errors
import pytest

from cloudrunner import __version__, images
from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker


def _run(client: docker.DockerClient, tracker: DockerTracker, image: str, script: str) -> str:
    container = tracker.track(
        client.containers.create(image, ["sh", "-c", script], labels=tracker.labels)
    )
    container.start()
    result = container.wait(timeout=60)
    logs = container.logs(stdout=True, stderr=True).decode()
    assert result["StatusCode"] == 0, logs
    return str(logs)


def test_runtime_image_has_the_tools_hooks_call_and_runs_as_non_root(
    docker_client: docker.DockerClient, docker_tracker: DockerTracker, runtime_image: str
) -> None:
    out = _run(
        docker_client,
        docker_tracker,
        runtime_image,
        "id -u; id -un; echo '{\"a\":41}' | jq '.a+1'; python3 -c 'print(6*7)';"
        " node -e 'console.log(40+2)'; bash -c 'echo bash-ok'; git --version; curl --version",
    )
    lines = out.splitlines()
    assert lines[0] == "10001"
    assert lines[1] == "hook"
    assert lines[2:6] == ["42", "42", "42", "bash-ok"]
    assert lines[6].startswith("git version ")
    assert lines[7].startswith("curl ")


def test_runtime_image_is_tagged_with_the_package_version_and_latest(
    docker_client: docker.DockerClient,
) -> None:
    versioned = docker_client.images.get(f"{images.RUNTIME_REPOSITORY}:{__version__}")
    latest = docker_client.images.get(images.DEFAULT_RUNTIME_IMAGE)
    assert versioned.id == latest.id
    key = latest.labels[images.BUILD_KEY_LABEL]
    base = docker_client.images.get(images.BASE_IMAGE)
    dockerfile = (images.images_dir() / "hook-runtime" / "Dockerfile").read_bytes()
    assert key == images.runtime_key(dockerfile, base.id)


def test_build_is_skipped_when_nothing_changed(docker_client: docker.DockerClient) -> None:
    steps = images.build_all()
    assert [s.built for s in steps] == [False, False]


def test_a_failed_debootstrap_tags_nothing(
    docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import uuid
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class NoMirror(BaseHTTPRequestHandler):
        """A mirror on loopback that has none of the files debootstrap asks for."""

        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NoMirror)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("CLOUDRUNNER_DEBIAN_MIRROR", f"http://127.0.0.1:{server.server_port}/debian")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    ref = f"cloudrunner/test-base:{uuid.uuid4().hex[:12]}"
    try:
        with pytest.raises(images.ImageBuildError, match="nothing was tagged"):
            images.build_base(docker_client, force=True, ref=ref)
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(ref)
