"""The hook runtime image, as built by `cloudrunner images build`, run for real."""

from __future__ import annotations

import uuid
from pathlib import Path

import docker
import docker.errors
import pytest

from cloudrunner import __version__
from cloudrunner.images import build as images
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


def _own_tag(runtime_image: str) -> str | None:
    """The tag a test run built for itself (CLOUDRUNNER_TEST_IMAGE), or None for the defaults."""
    return None if runtime_image == images.DEFAULT_RUNTIME_IMAGE else runtime_image


def test_runtime_image_carries_the_key_of_what_it_was_built_from(
    docker_client: docker.DockerClient, runtime_image: str
) -> None:
    built = docker_client.images.get(runtime_image)
    if _own_tag(runtime_image) is None:
        versioned = docker_client.images.get(f"{images.RUNTIME_REPOSITORY}:{__version__}")
        assert versioned.id == built.id
    key = built.labels[images.BUILD_KEY_LABEL]
    base = docker_client.images.get(images.BASE_IMAGE)
    source = images.images_dir() / "hook-runtime"
    dockerfile = (source / "Dockerfile").read_bytes()
    manifest = (source / "artefacts.json").read_bytes()
    assert key == images.runtime_key(dockerfile, base.id, manifest)


def test_build_is_skipped_when_nothing_changed(
    docker_client: docker.DockerClient, runtime_image: str
) -> None:
    tag = _own_tag(runtime_image)
    if tag is not None:  # a run's own runtime tag: base and runtime only
        assert [s.built for s in images.build_all(tag=tag)] == [False, False]
        return
    steps = images.build_all()
    assert [s.image.split(":")[0] for s in steps] == [
        "cloudrunner/base", "cloudrunner/hook-runtime", "cloudrunner/egress-proxy",
    ]  # fmt: skip
    assert [s.built for s in steps] == [False, False, False]


def test_registry_tools_run_as_the_hook_user_without_network(
    docker_client: docker.DockerClient, docker_tracker: DockerTracker, runtime_image: str
) -> None:
    """What the corpus's hooks launch, each doing real work with no network at all."""
    script = (
        "set -e; cd /tmp; python -c 'import sys; print(sys.version_info[0])';"
        " node -e 'console.log(process.versions.node.split(\".\")[0] >= 20)';"
        " npm --version >/dev/null && echo npm-ok; npx --version >/dev/null && echo npx-ok;"
        " pnpm --version >/dev/null && echo pnpm-ok;"
        " bun -e 'console.log(6*7)'; bunx --version >/dev/null && echo bunx-ok;"
        " uv --version | cut -d' ' -f1; uvx --version | cut -d' ' -f1;"
        " sqlite3 :memory: 'select 40+2;'; printf 'x\\nneedle\\n' > f; rg -c needle f;"
        " zsh -c 'echo zsh-ok'; head -1 /usr/local/bin/npm | cut -c1-9"
    )
    container = docker_tracker.track(
        docker_client.containers.create(
            runtime_image, ["sh", "-c", script], labels=docker_tracker.labels,
            network_disabled=True, network_mode="none",
        )
    )  # fmt: skip
    container.start()
    result = container.wait(timeout=120)
    logs = container.logs(stdout=True, stderr=True).decode()
    assert result["StatusCode"] == 0, logs
    assert logs.splitlines() == [
        "3", "true", "npm-ok", "npx-ok", "pnpm-ok", "42", "bunx-ok", "uv", "uvx", "42", "1",
        "zsh-ok", "#!/bin/sh",
    ], logs  # fmt: skip


def test_a_failed_debootstrap_tags_nothing(
    docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
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


def test_a_failed_build_says_its_last_output_and_tags_nothing(
    docker_client: docker.DockerClient, docker_tracker: DockerTracker, tmp_path: Path
) -> None:
    (tmp_path / "Dockerfile").write_text(
        f"FROM {images.BASE_IMAGE}\nRUN echo the-build-broke >&2; exit 3\n"
    )
    ref = f"cloudrunner/test-broken:{uuid.uuid4().hex[:12]}"
    with pytest.raises(images.ImageBuildError) as info:
        images.run_build(
            docker_client, tmp_path, ref, buildargs={}, labels=dict(docker_tracker.labels)
        )
    message = info.value.message
    assert message.startswith(f"building {ref} failed: "), message
    head, _, output = message.partition("; nothing was tagged. Last output:\n")
    assert "non-zero code: 3" in head, message
    assert "the-build-broke" in output, message  # stderr, between colour codes
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(ref)
