"""The worker's image end to end: built from this source tree on the local Debian base, run
beside the host engine's socket as deploy/compose.yaml runs it, pointed at a test
repository, and driven with `cloudrunner hook` from the host."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from docker.models.containers import Container

from cloudrunner.audit import verify_log
from cloudrunner.version import VERSION, commit
from tests.e2e.conftest import Deployment, make_deployment
from tests.support.docker_tracking import DockerTracker
from tests.support.waiting import wait_for

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
WORKER_UID = 10010  # the image's user (Dockerfile)
TCP_PORT = 8765


@pytest.fixture(scope="session")
def worker_image(docker_client: docker.DockerClient) -> Iterator[str]:
    """The worker image, built once per test session under a tag of its own (removed at the
    end; the layers stay as the build cache)."""
    tag = f"cloudrunner/worker:test-{uuid.uuid4().hex[:10]}"
    proc = subprocess.run(
        ["bash", "scripts/build-worker-image", "--no-setup", "--tag", tag],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"building the worker image failed:\n{proc.stderr[-4000:]}", pytrace=False)
    try:
        yield tag
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.images.remove(tag, noprune=True)


def engine_socket() -> Path:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        pytest.fail(f"the worker image test mounts the engine's unix socket; DOCKER_HOST={host}")
    return Path(host.removeprefix("unix://"))


@dataclass
class RunningWorker:
    container: Container
    deployment: Deployment

    @property
    def socket(self) -> Path:
        return self.deployment.state / "cloudrunner.sock"

    def client(
        self, *args: str, payload: dict[str, Any] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`cloudrunner ARGS` on the host, as an agent's hook command calls it."""
        return subprocess.run(
            [sys.executable, "-m", "cloudrunner", *args],
            input=json.dumps(payload) if payload is not None else "",
            capture_output=True,
            text=True,
            env=self.deployment.base_env(),
            timeout=300,
            check=False,
        )

    def hook(self, payload: dict[str, Any], *endpoint: str) -> dict[str, Any]:
        where = endpoint or ("--socket", str(self.socket))
        proc = self.client("hook", str(payload["hook_event_name"]), *where, payload=payload)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == "", proc.stderr  # an answer from the daemon, not a fallback
        answer = json.loads(proc.stdout)
        assert isinstance(answer, dict)
        return answer

    def wait_until_serving(self, *endpoint: str) -> None:
        """Poll `cloudrunner health` until the daemon answers (bounded; fails with its log)."""
        where = endpoint or ("--socket", str(self.socket))

        def answers() -> bool:
            self.container.reload()
            if self.container.status not in ("created", "running"):
                pytest.fail(f"the worker exited:\n{self.logs()}", pytrace=False)
            return self.client("health", *where).returncode == 0

        wait_for(answers, f"the worker answering on {where}", timeout_s=180, interval_s=0.5,
                 explain=self.logs)  # fmt: skip

    def logs(self) -> str:
        return self.container.logs().decode(errors="replace")

    def sandboxes(self, client: docker.DockerClient) -> list[Container]:
        labelled = client.containers.list(
            all=True, filters={"label": f"cloudrunner.worker={self.deployment.worker_id}"}
        )
        return [c for c in labelled if c.id != self.container.id]


@pytest.fixture
def deployment(tmp_path: Path, docker_tracker: DockerTracker) -> Deployment:
    """The demo repository's origin, enterprise hooks and a state directory, owned by the
    image's user, under a directory mounted at the same path inside the worker."""
    tmp_path.chmod(0o755)
    deployed = make_deployment(tmp_path, docker_tracker.worker_id)
    deployed.state.mkdir()
    for path in (tmp_path, deployed.origin, deployed.state):
        for directory, _, files in os.walk(path):
            os.chown(directory, WORKER_UID, WORKER_UID)
            for name in files:
                os.chown(os.path.join(directory, name), WORKER_UID, WORKER_UID)
    return deployed


def start_worker(
    client: docker.DockerClient,
    image: str,
    deployment: Deployment,
    tracker: DockerTracker,
    *,
    isolation: str = "session",
    args: Sequence[str] = (),
    ports: dict[str, tuple[str, None]] | None = None,
) -> RunningWorker:
    socket = engine_socket()
    root = str(deployment.root)
    enterprise = str(deployment.enterprise)
    container = client.containers.run(
        image,
        command=list(args),
        detach=True,
        name=f"cloudrunner-worker-{tracker.worker_id}",
        labels=tracker.labels,  # the CI's clean-up finds it too
        group_add=[str(socket.stat().st_gid)],
        # confined as deploy/compose.yaml confines it
        read_only=True,
        tmpfs={"/tmp": "size=64m,mode=1777"},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges:true"],
        volumes={
            str(socket): {"bind": "/var/run/docker.sock", "mode": "rw"},
            root: {"bind": root, "mode": "rw"},  # workspace and state at identical paths
            enterprise: {"bind": enterprise, "mode": "ro"},  # read-only config
        },
        environment={
            "CLOUDRUNNER_STATE_DIR": str(deployment.state),
            "CLOUDRUNNER_WORKER_ID": tracker.worker_id,
            "CLOUDRUNNER_REPO": deployment.origin.as_uri(),
            "CLOUDRUNNER_REF": "main",
            "CLOUDRUNNER_WORKSPACE": str(deployment.workspace),
            "CLOUDRUNNER_ENTERPRISE_HOOKS": f"{enterprise}/hooks.json",
            "CLOUDRUNNER_ISOLATION": isolation,
        },
        ports=ports or {},
    )
    tracker.track(container)
    return RunningWorker(container, deployment)


def test_the_image_runs_serve_as_a_non_root_user_with_a_healthcheck(
    docker_client: docker.DockerClient, worker_image: str
) -> None:
    config = docker_client.images.get(worker_image).attrs["Config"]
    assert config["User"] == f"{WORKER_UID}:{WORKER_UID}"
    assert config["Entrypoint"][-2:] == ["cloudrunner", "serve"]
    assert config["Healthcheck"]["Test"] == ["CMD", "cloudrunner-hook", "health"]
    # the build stage installed Debian's Python: the base image has none
    base = docker_client.images.get("cloudrunner/base:bookworm")
    assert not base.attrs["Config"].get("Entrypoint")
    script = (
        "id -u; cloudrunner --version; cloudrunner-hook --version; command -v docker || true; "
        "command -v cloudrunner-hook; "
        "echo '{}' | cloudrunner-hook hook stop --socket /nowhere/cloudrunner.sock 2>/dev/null"
    )
    out = docker_client.containers.run(
        worker_image, entrypoint=["sh", "-c"], command=[script], remove=True, network_mode="none"
    ).decode()
    # no docker CLI; the compiled client, with no daemon there, answers by the policy
    # both clients print the version and the commit the image was built from
    stamp = f"{VERSION} (commit {commit()})"
    assert out.splitlines() == [
        str(WORKER_UID), f"cloudrunner {stamp}", f"cloudrunner-hook {stamp}",
        "/opt/cloudrunner/bin/cloudrunner-hook", "{}",
    ]  # fmt: skip
    labels = docker_client.images.get(worker_image).labels
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.revision"] == commit()


@pytest.mark.parametrize("isolation", ["session", "hook"])
def test_the_worker_answers_events_through_the_host_socket_and_records_them(
    docker_client: docker.DockerClient,
    worker_image: str,
    deployment: Deployment,
    docker_tracker: DockerTracker,
    isolation: str,
) -> None:
    worker = start_worker(
        docker_client, worker_image, deployment, docker_tracker, isolation=isolation
    )
    worker.wait_until_serving()
    ready = worker.client("health", "--ready", "--socket", str(worker.socket))
    assert ready.returncode == 0, ready.stderr
    assert json.loads(ready.stdout)["ready"] is True
    # the image's own HEALTHCHECK command, in the container's environment
    exit_code, output = worker.container.exec_run(["cloudrunner-hook", "health"])
    assert exit_code == 0, output
    # the compiled client inside the image reaches the daemon on its default socket
    exit_code, output = worker.container.exec_run(
        ["sh", "-c", 'echo \'{"command": "ls"}\' | cloudrunner-hook hook beforeShellExecution']
    )
    assert exit_code == 0 and json.loads(output) == {"permission": "allow"}, output

    denied = worker.hook(deployment.event("beforeShellExecution", command="rm -rf /", cwd="/"))
    assert denied["permission"] == "deny"
    assert "recursive delete" in denied["user_message"]
    assert worker.hook(deployment.event("beforeShellExecution", command="ls")) == {
        "permission": "allow"
    }
    blocked = worker.hook(deployment.event("beforeSubmitPrompt", prompt="AKIAABCDEFGHIJKLMNOP"))
    assert blocked["continue"] is False
    assert "credential" in blocked["user_message"]

    # the clone belongs to the image's user, so hooks (run as the workspace's owner) can
    # write it; the hook containers are siblings on the host engine
    assert (deployment.workspace / ".cursor" / "hooks.json").stat().st_uid == WORKER_UID
    records = deployment.records()
    hooks = [r for r in records if r["kind"] == "hook"]
    assert [(h["source"], h["outcome"]) for h in hooks] == [("project", "ok"), ("enterprise", "ok")]
    assert all(h["attestation"]["isolation"] == isolation for h in hooks)
    assert {r["worker"] for r in records} == {deployment.worker_id}
    assert verify_log(deployment.audit_log).ok
    if isolation == "session":
        warm = worker.sandboxes(docker_client)
        assert warm and all(c.status == "running" for c in warm)

    # SIGTERM (through tini): drains, closes the warm sandboxes, removes its socket
    worker.container.stop(timeout=90)
    worker.container.reload()
    assert worker.container.attrs["State"]["ExitCode"] == 0, worker.logs()
    assert "cloudrunner: stopped" in worker.logs()
    assert worker.sandboxes(docker_client) == []
    assert not worker.socket.exists()
    assert verify_log(deployment.audit_log).ok


def test_the_worker_serves_tcp_on_loopback_with_a_bearer_token(
    docker_client: docker.DockerClient,
    worker_image: str,
    deployment: Deployment,
    docker_tracker: DockerTracker,
) -> None:
    token = deployment.root / "token"
    token.write_text(uuid.uuid4().hex + uuid.uuid4().hex + "\n")
    os.chown(token, WORKER_UID, WORKER_UID)
    token.chmod(0o600)
    wrong = deployment.root / "wrong-token"
    wrong.write_text("x" * 32)
    worker = start_worker(
        docker_client, worker_image, deployment, docker_tracker,
        args=["--listen", f"0.0.0.0:{TCP_PORT}", "--token-file", str(token)],
        ports={f"{TCP_PORT}/tcp": ("127.0.0.1", None)},
    )  # fmt: skip
    worker.wait_until_serving()
    worker.container.reload()
    published = worker.container.attrs["NetworkSettings"]["Ports"][f"{TCP_PORT}/tcp"][0]
    assert published["HostIp"] == "127.0.0.1"
    url = f"http://127.0.0.1:{published['HostPort']}"
    over_tcp = ("--url", url, "--token-file", str(token))
    worker.wait_until_serving(*over_tcp)

    denied = worker.hook(
        deployment.event("beforeShellExecution", command="git push --force", cwd="/"), *over_tcp
    )
    assert denied["permission"] == "deny"
    assert "force push" in denied["user_message"]

    refused = worker.client("health", "--url", url, "--token-file", str(wrong))
    assert refused.returncode == 1
    assert "401" in refused.stderr

    request = urllib.request.Request(
        f"{url}/metrics", headers={"Authorization": f"Bearer {token.read_text().strip()}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        metrics = response.read().decode()
    assert 'cloudrunner_events_total{event="beforeShellExecution"' in metrics
    with pytest.raises(urllib.error.HTTPError) as no_token:
        urllib.request.urlopen(f"{url}/metrics", timeout=30)
    assert no_token.value.code == 401
    assert [r["kind"] for r in deployment.records()].count("hook") == 1
    worker.container.stop(timeout=90)
    assert worker.sandboxes(docker_client) == []
