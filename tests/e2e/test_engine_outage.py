"""The Docker engine stopping between two events: a defined answer, a recorded failure,
and a message that names the fix. Stops the real dockerd, so it runs last (see conftest) and
only where nothing else shares the engine: in CI, or with CLOUDRUNNER_TEST_DISRUPTIVE=1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import docker
import pytest
import requests

from cloudrunner.audit import verify_log
from cloudrunner.client import HttpReply
from cloudrunner.version import identity
from tests.e2e.conftest import Deployment
from tests.support.ci import in_ci
from tests.support.daemon_process import daemon_process
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.disruptive]

REPO = Path(__file__).resolve().parents[2]


def _engine_answers() -> bool:
    try:
        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
        # an engine going away mid-call surfaces as a raw requests error in docker-py
        return False
    return True


def _stop_dockerd() -> None:
    pids = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True).stdout
    assert pids.split(), "no dockerd process to stop (is the engine a system service?)"
    for pid in pids.split():
        os.kill(int(pid), signal.SIGTERM)
    wait_for(
        lambda: not (_engine_answers() or _dockerd_running()), "dockerd stopped", timeout_s=60,
        interval_s=0.2,
    )  # fmt: skip


def _dockerd_running() -> bool:
    return subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True).returncode == 0


def _skip_unless_allowed() -> None:
    if not (in_ci() or os.environ.get("CLOUDRUNNER_TEST_DISRUPTIVE") == "1"):
        pytest.skip(
            "stops the shared Docker engine: runs in CI or with CLOUDRUNNER_TEST_DISRUPTIVE=1"
        )


@pytest.mark.parametrize("deployment", ["hook"], indirect=True)
def test_engine_stopped_between_two_events(deployment: Deployment) -> None:
    _skip_unless_allowed()
    guard = deployment.event("beforeShellExecution", command="rm -rf /")
    assert deployment.answer(guard)["permission"] == "deny"
    try:
        _stop_dockerd()
        # the guard is failClosed: with no engine its action is blocked, and says why
        answer = deployment.answer(guard)
        assert answer["permission"] == "deny"
        assert "sandbox_error" in answer["agent_message"]
        # a fail-open hook lets the action through
        stop = deployment.answer(deployment.event("stop", status="completed"))
        assert "followup_message" not in stop
        failed = [r for r in deployment.records() if r["kind"] == "hook"][-2:]
        assert [r["outcome"] for r in failed] == ["sandbox_error", "sandbox_error"]
        assert all("docker-up" in r["reason"] for r in failed)
        assert verify_log(deployment.audit_log).ok
    finally:
        subprocess.run(["bash", str(REPO / "scripts" / "docker-up")], check=True, timeout=120)
    assert _engine_answers()
    # and the next event runs its hooks again
    assert "agent_message" not in deployment.answer(
        deployment.event("beforeShellExecution", command="git push origin")
    )


@pytest.mark.parametrize("deployment", ["session"], indirect=True)
def test_engine_stopped_while_the_daemon_runs(deployment: Deployment) -> None:
    """Events answer by policy while the engine is gone, /readyz says so, and the daemon
    recovers by itself when the engine is back (its warm sandboxes are replaced)."""
    _skip_unless_allowed()
    daemon = daemon_process(
        deployment.flags(), state=deployment.state, worker_id=deployment.worker_id
    ).start()
    guard = deployment.event("beforeShellExecution", command="rm -rf /",
                             cwd=str(deployment.workspace))  # fmt: skip
    try:
        assert (
            "recursive delete"
            in _answer(daemon.event("beforeShellExecution", guard))["user_message"]
        )
        try:
            _stop_dockerd()
            ready = daemon.call("GET", "/readyz")
            assert ready.status == 503
            assert "Docker engine does not answer" in json.loads(ready.body)["reason"]
            answer = _answer(daemon.event("beforeShellExecution", guard))
            assert answer["permission"] == "deny" and "sandbox_error" in answer["agent_message"]
            assert "followup_message" not in _answer(
                daemon.event("stop", deployment.event("stop", status="completed"))
            )
            assert _answer(daemon.call("GET", "/healthz")) == {"status": "ok", **identity()}
        finally:
            subprocess.run(["bash", str(REPO / "scripts" / "docker-up")], check=True, timeout=120)
        wait_for(
            lambda: daemon.call("GET", "/readyz").status == 200, "the daemon ready again",
            timeout_s=60, interval_s=0.5,
        )  # fmt: skip
        answer = _answer(daemon.event("beforeShellExecution", guard))
        assert "recursive delete" in answer["user_message"], answer
    finally:
        daemon.stop()
    assert verify_log(deployment.audit_log).ok


def _answer(reply: HttpReply) -> dict[str, Any]:
    assert reply.status == 200, reply.body
    value = json.loads(reply.body)
    assert isinstance(value, dict)
    return value
