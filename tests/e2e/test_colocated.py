"""The co-located model for real: deploy/compose.agent.yaml's two services on the test's own
engine, as the file declares them (tests/support/compose_services.py). An agent stand-in
(the worker image, sleeping) edits files in the shared workspace and sends each event
through the client over the shared socket; the worker beside it, with the workspace at the
same path, clones the repository into it and runs the hooks there.

The workspace is a real mount on the host: first a read-only bind, later a writable one
mounted over it, which the rslave propagation of the compose file carries into both
containers, as a cloud agent's disk that becomes writable would."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest
from docker.models.containers import Container

from cloudrunner.audit import verify_log
from tests.e2e.conftest import Deployment, make_deployment
from tests.e2e.test_worker_image import WORKER_UID, engine_socket, worker_image  # noqa: F401
from tests.support.ci import needs_root
from tests.support.cloud_payloads import payload
from tests.support.compose_services import run_arguments, service
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import git
from tests.support.mounts import mount
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.docker, needs_root("mounts the workspace read-only, then writable")]

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "compose.agent.yaml"
#: what the agent stand-in runs for an event: the compiled client where the image has it
CLIENT = "$(command -v cloudrunner-hook || command -v cloudrunner) hook"


@dataclass
class Colocated:
    deployment: Deployment
    disk: Path
    run_dir: Path
    agent: Container
    worker: Container

    @property
    def workspace(self) -> Path:
        return self.deployment.workspace

    def send(self, event: str, **fields: Any) -> tuple[int, dict[str, Any], str]:
        """One event through the client in the agent's container: (exit, answer, stderr)."""
        body = json.dumps(payload(event, str(self.workspace), **fields))
        script = f"printf '%s' {shlex.quote(body)} | {CLIENT} {event}"
        code, (out, err) = self.agent.exec_run(["sh", "-c", script], demux=True)
        stderr = (err or b"").decode()
        assert out, f"no answer to {event} (exit {code}): {stderr}"
        return code, json.loads(out), stderr

    def agent_shell(self, script: str) -> tuple[int, str]:
        code, out = self.agent.exec_run(["sh", "-c", script])
        return code, out.decode()

    def wait_until_serving(self) -> None:
        def logs() -> str:
            return self.worker.logs().decode(errors="replace")

        def answers() -> bool:
            code, _ = self.agent.exec_run(["cloudrunner", "health"])
            if code == 0:
                return True
            self.worker.reload()
            if self.worker.status not in ("created", "running"):
                pytest.fail(f"the worker never answered:\n{logs()}", pytrace=False)
            return False

        wait_for(answers, "the worker answering", timeout_s=180, interval_s=0.5, explain=logs)

    def records(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.deployment.records() if r["kind"] == kind]


def _chown(path: Path) -> None:
    for directory, _, files in os.walk(path):
        os.chown(directory, WORKER_UID, WORKER_UID)
        for name in files:
            os.chown(os.path.join(directory, name), WORKER_UID, WORKER_UID)


def _mount_over(disk: Path, workspace: Path, *, writable: bool) -> None:
    mount("--bind", str(disk), str(workspace))
    if not writable:
        mount("-o", "remount,bind,ro", str(workspace))
    mount("--make-shared", str(workspace))


def _unmount_all(workspace: Path) -> None:
    """Every mount stacked on `workspace` (os.path.ismount cannot tell a bind mount from
    the same file system: umount until it says there is nothing left)."""
    for _ in range(8):
        done = subprocess.run(["umount", "-l", str(workspace)], check=False, capture_output=True)
        if done.returncode != 0:
            return


@contextlib.contextmanager
def colocated(
    client: docker.DockerClient,
    image: str,
    base: Path,
    tracker: DockerTracker,
    *,
    writable: bool,
    agent_clones: bool = False,
) -> Iterator[Colocated]:
    """The two services; the worker clones the repository into the workspace, or with
    `agent_clones` adopts the checkout the agent's platform made (CLOUDRUNNER_REPO empty)."""
    base.chmod(0o755)
    deployment = make_deployment(base, tracker.worker_id)
    disk, run_dir = base / "disk", base / "run"
    for directory in (deployment.state, deployment.workspace, disk, run_dir):
        directory.mkdir()
    run_dir.chmod(0o700)
    if agent_clones:
        git(base, "clone", "-q", str(deployment.origin), str(disk))
    _chown(base)
    variables = {
        "AGENT_IMAGE": image,
        "DOCKER_GID": str(engine_socket().stat().st_gid),
        "CLOUDRUNNER_WORKSPACE": str(deployment.workspace),
        "CLOUDRUNNER_RUN_DIR": str(run_dir),
        "CLOUDRUNNER_STATE_DIR": str(deployment.state),
        "CLOUDRUNNER_ENTERPRISE_DIR": str(deployment.enterprise),
        "CLOUDRUNNER_WORKER_ID": tracker.worker_id,
        "CLOUDRUNNER_VERSION": image.rsplit(":", 1)[1],
        "CLOUDRUNNER_REPO": "" if agent_clones else deployment.origin.as_uri(),
        "CLOUDRUNNER_REF": "" if agent_clones else "main",
    }
    _mount_over(disk, deployment.workspace, writable=writable)
    started: list[Container] = []
    try:
        worker_spec = run_arguments(service(COMPOSE, "worker", variables))
        # the test's repository, where the worker can read it (a URL in a deployment)
        worker_spec["mounts"].append(
            docker.types.Mount(str(deployment.origin), str(deployment.origin), type="bind",
                               read_only=True)
        )  # fmt: skip
        worker = client.containers.run(
            name=f"cloudrunner-worker-{tracker.worker_id}", labels=tracker.labels, **worker_spec
        )
        started.append(tracker.track(worker))
        agent_spec = run_arguments(service(COMPOSE, "agent", variables))
        agent = client.containers.run(
            name=f"cloudrunner-agent-{tracker.worker_id}", labels=tracker.labels,
            entrypoint=["sleep", "infinity"], network_mode="none", **agent_spec,
        )  # fmt: skip
        started.append(tracker.track(agent))
        setup = Colocated(deployment, disk, run_dir, agent, worker)
        setup.wait_until_serving()
        yield setup
    finally:
        for container in reversed(started):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
        _unmount_all(deployment.workspace)


Start = Callable[..., contextlib.AbstractContextManager[Colocated]]


@pytest.fixture
def start(
    docker_client: docker.DockerClient,
    worker_image: str,  # noqa: F811
    tmp_path: Path,
    docker_tracker: DockerTracker,
) -> Start:
    """`colocated` on this test's engine, image, directory and tracker."""
    return functools.partial(colocated, docker_client, worker_image, tmp_path, docker_tracker)


def test_hooks_act_on_the_agents_workspace_from_the_moment_it_is_writable(start: Start) -> None:
    with start(writable=False) as c:
        ws = c.workspace
        # the agent runs the compiled client, which the worker image carries
        code, found = c.agent_shell("command -v cloudrunner-hook")
        assert code == 0 and found.strip() == "/opt/cloudrunner/bin/cloudrunner-hook"
        # read-only: the agent cannot write, the gate holds, nothing is cloned
        code, said = c.agent_shell(f"touch {ws}/probe")
        assert code != 0 and "Read-only file system" in said
        code, answer, stderr = c.send("beforeShellExecution", command="rm -rf /", cwd=str(ws))
        assert (code, answer, stderr) == (0, {"permission": "allow"}, "")  # gated: neutral
        (gated,) = c.records("gated")
        assert gated["event"] == "beforeShellExecution"
        assert list(c.disk.iterdir()) == [] and c.records("hook") == []

        # writable: mounted over it on the host, seen in both containers
        mount("--bind", str(c.disk), str(ws))
        code, answer, _ = c.send("beforeShellExecution", command="rm -rf /", cwd=str(ws))
        assert answer["permission"] == "deny" and "recursive delete" in answer["user_message"]
        assert (c.disk / ".git").is_dir() and (c.disk / ".cursor" / "hooks.json").is_file()
        received = c.records("received")
        assert {r["workspace"] for r in received} == {str(ws)}

        # afterFileEdit: the formatter rewrites the agent's file, as the agent sees it
        code, _ = c.agent_shell(f"printf 'x = 1   \\ny = 2\\t\\n\\n\\n' > {ws}/src/edited.py")
        assert code == 0
        code, answer, stderr = c.send(
            "afterFileEdit", file_path=f"{ws}/src/edited.py",
            edits=[{"old_string": "", "new_string": "x = 1   \ny = 2\t\n\n\n"}],
        )  # fmt: skip
        assert (code, answer, stderr) == (0, {}, "")
        code, seen = c.agent_shell(f"cat {ws}/src/edited.py")
        assert seen == "x = 1\ny = 2\n"

        # stop: the hook reads the TODO.md the agent last wrote
        c.agent_shell(f"printf -- '- [ ] one\\n- [ ] two\\n- [x] three\\n' > {ws}/TODO.md")
        _, answer, _ = c.send("stop", conversation_id="todo-1")
        assert "2 open item(s)" in answer["followup_message"]
        c.agent_shell(f"printf -- '- [x] one\\n- [ ] two\\n- [x] three\\n' > {ws}/TODO.md")
        _, answer, _ = c.send("stop", conversation_id="todo-2")
        assert "1 open item(s)" in answer["followup_message"]
        c.agent_shell(f"printf -- '- [x] one\\n- [x] two\\n' > {ws}/TODO.md")
        _, answer, _ = c.send("stop", conversation_id="todo-3")
        assert "followup_message" not in answer

        c.worker.stop(timeout=90)
        assert verify_log(c.deployment.audit_log).ok


def test_an_event_naming_another_directory_is_refused_and_runs_nothing(start: Start) -> None:
    with start(writable=True, agent_clones=True) as c:
        ws = c.workspace
        _, answer, _ = c.send("beforeShellExecution", command="ls", cwd=str(ws))
        assert answer == {"permission": "allow"}  # adopted; `ls` matches no guard
        hooks_before = len(c.records("hook"))
        elsewhere = "/tmp/another-checkout"
        code, answer, stderr = c.send(
            "beforeShellExecution", command="rm -rf /", cwd=elsewhere,
            workspace_roots=[elsewhere], generation_id="gen-elsewhere",
        )  # fmt: skip
        assert code == 0 and "refused the event" in stderr and elsewhere in stderr
        (refused,) = c.records("refused")
        assert elsewhere in refused["reason"] and str(ws) in refused["reason"]
        assert refused["generation_id"] == "gen-elsewhere"
        assert len(c.records("hook")) == hooks_before
        assert not any(r.get("generation_id") == "gen-elsewhere" for r in c.records("received"))
        # nothing ran: the client's fail policy answered, and the published policy blocks
        # this event (the repository's guard for it is failClosed)
        assert answer["permission"] == "deny" and "fail-closed" in answer["agent_message"]
        c.worker.stop(timeout=90)
        assert verify_log(c.deployment.audit_log).ok


def test_a_failclosed_guard_blocks_while_the_worker_is_stopped(start: Start) -> None:
    with start(writable=True) as c:
        _, answer, _ = c.send("beforeShellExecution", command="ls", cwd=str(c.workspace))
        assert answer == {"permission": "allow"}  # cloned; the guard is loaded
        c.worker.stop(timeout=90)
        code, answer, stderr = c.send("beforeShellExecution", command="rm -rf /")
        assert code == 0 and "blocking (fail-closed)" in stderr
        assert answer["permission"] == "deny"
        assert "could not run the hooks" in answer["agent_message"]
        # back up: the daemon records what the client decided while it was down
        c.worker.start()
        c.wait_until_serving()
        (fallback,) = c.records("fallback")
        assert fallback["event"] == "beforeShellExecution" and fallback["outcome"] == "blocked"
        assert fallback["decided_by"] == "policy" and fallback["client"] == "cloudrunner-hook"
        c.worker.stop(timeout=90)
        assert verify_log(c.deployment.audit_log).ok
