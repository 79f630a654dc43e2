"""The daemon's per-event shortcuts never serve stale state: an edited hooks file takes
effect on the very next event (edits of the same size, back to back), a new commit is in
the very next decision record, and concurrent events share audit syncs yet each is on disk
and chained when answered. Real daemon, real session containers, real git."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.audit.verify import verify_log
from tests.e2e.conftest import Deployment, make_deployment
from tests.support.concurrency import run_in_threads
from tests.support.daemon_process import DaemonProcess, daemon_process
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import git


def deny_with(message: str) -> str:
    answer = json.dumps({"permission": "deny", "user_message": message})
    hooks = {"beforeShellExecution": [{"command": f"cat >/dev/null; echo '{answer}'"}]}
    return json.dumps({"version": 1, "hooks": hooks})


@pytest.fixture
def warm(
    tmp_path: Path, docker_tracker: DockerTracker
) -> Iterator[tuple[Deployment, DaemonProcess]]:
    tmp_path.chmod(0o755)
    deployed = make_deployment(tmp_path, docker_tracker.worker_id)
    deployed.isolation = "session"
    (deployed.enterprise / "hooks.json").write_text(deny_with("AAAA"))
    daemon = daemon_process(
        deployed.flags(), state=deployed.state, worker_id=deployed.worker_id
    ).start()
    try:
        yield deployed, daemon
    finally:
        daemon.stop()


def answer(daemon: DaemonProcess, payload: dict[str, Any]) -> dict[str, Any]:
    reply = daemon.event("beforeShellExecution", payload)
    assert reply.status == 200, reply.body[:300]
    value = json.loads(reply.body)
    assert isinstance(value, dict)
    return value


def test_edits_and_commits_are_seen_on_the_next_event(
    warm: tuple[Deployment, DaemonProcess],
) -> None:
    deployment, daemon = warm
    hooks = deployment.enterprise / "hooks.json"
    payload = deployment.event("beforeShellExecution", command="ls", cwd=str(deployment.workspace))
    assert "AAAA" in answer(daemon, payload)["user_message"]
    # Same size, in place and by rename, as fast as the events come: each one is seen.
    for message in ("BBBB", "CCCC", "AAAA", "DDDD"):
        with open(hooks, "r+") as fh:
            fh.write(deny_with(message))
        assert message in answer(daemon, payload)["user_message"]
        fresh = hooks.with_name("hooks.json.new")
        fresh.write_text(deny_with(message[::-1].lower()))
        fresh.replace(hooks)
        assert message[::-1].lower() in answer(daemon, payload)["user_message"]
    # Removed: no enterprise hooks, the project's guard answers (ls is harmless).
    hooks.unlink()
    assert answer(daemon, payload)["permission"] == "allow"

    # A commit made in the workspace is the commit of the next decision.
    (deployment.workspace / "new-file").write_text("x")
    # The daemon made the clone as another user: git wants that said.
    safe = ("-c", f"safe.directory={deployment.workspace}")
    git(deployment.workspace, *safe, "add", "new-file")
    git(deployment.workspace, *safe, "commit", "-q", "-m", "more")
    head = git(deployment.workspace, *safe, "rev-parse", "HEAD")
    answer(daemon, payload)
    daemon.stop()
    decisions = [r for r in deployment.records() if r["kind"] == "decision"]
    assert decisions[-1]["commit"] == head
    assert decisions[-2]["commit"] != head
    assert verify_log(deployment.audit_log).ok


def test_concurrent_events_share_syncs_and_keep_one_chain(
    warm: tuple[Deployment, DaemonProcess],
) -> None:
    deployment, daemon = warm
    results: list[tuple[int, dict[str, Any]]] = []
    lock = threading.Lock()

    def send(index: int) -> None:
        payload = deployment.event(
            "beforeShellExecution", command="ls", cwd=str(deployment.workspace),
            conversation_id=f"conv-{index % 8}", generation_id=f"gen-{index}",
        )  # fmt: skip
        got = answer(daemon, payload)
        # Answered means recorded: the decision is in the log already.
        recorded = {r.get("generation_id") for r in deployment.records()}
        with lock:
            results.append((index, got))
        if f"gen-{index}" not in recorded:
            raise AssertionError(f"gen-{index} answered before recorded")

    failures = run_in_threads(48, send, timeout_s=300)
    assert failures == []
    assert len(results) == 48 and all("AAAA" in a["user_message"] for _, a in results)
    daemon.stop()
    decisions = [r for r in deployment.records() if r["kind"] == "decision"]
    assert sorted(d["generation_id"] for d in decisions) == sorted(f"gen-{i}" for i in range(48))
    report = verify_log(deployment.audit_log)
    assert report.ok
