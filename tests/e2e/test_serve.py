"""`cloudrunner serve` and `cloudrunner hook` end to end: real processes, real containers."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from cloudrunner.audit.verify import verify_log
from cloudrunner.client import Unreachable, request
from cloudrunner.version import identity
from tests.e2e.conftest import Deployment, make_deployment
from tests.support.concurrency import run_in_threads
from tests.support.daemon_process import DaemonProcess, daemon_process, run_client
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import committed_repo, git
from tests.support.prometheus import value
from tests.support.waiting import wait_for

SLOW_HOOK = 'cat >/dev/null; sleep "${SLOW:-3}"; echo "{}"'


def _serve(deployment: Deployment, *extra: str, env: dict[str, str] | None = None) -> DaemonProcess:
    return daemon_process(
        [*deployment.flags(), *extra], state=deployment.state, worker_id=deployment.worker_id,
        env=env,
    )  # fmt: skip


@pytest.fixture
def served(deployment: Deployment) -> Iterator[tuple[Deployment, DaemonProcess]]:
    """The demo deployment behind a running daemon (hook and session isolation)."""
    daemon = _serve(deployment).start()
    try:
        yield deployment, daemon
    finally:
        daemon.stop()


@pytest.fixture
def warm(
    tmp_path: Path, docker_tracker: DockerTracker
) -> Iterator[tuple[Deployment, DaemonProcess]]:
    """The demo deployment behind a daemon in session isolation (the warm path)."""
    tmp_path.chmod(0o755)
    deployed = make_deployment(tmp_path, docker_tracker.worker_id)
    deployed.isolation = "session"
    daemon = _serve(deployed).start()
    try:
        yield deployed, daemon
    finally:
        daemon.stop()


def _client_env(daemon: DaemonProcess) -> dict[str, str]:
    return {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}


def _answer(reply: Any) -> dict[str, Any]:
    assert reply.status == 200, reply.body
    value = json.loads(reply.body)
    assert isinstance(value, dict)
    return value


def _error(reply: Any) -> tuple[int, str]:
    return reply.status, json.loads(reply.body)["error"]["code"]


# --------------------------------------------------------------------------- the client


def test_the_client_answers_through_the_daemon(served: tuple[Deployment, DaemonProcess]) -> None:
    deployment, daemon = served
    env = _client_env(daemon)
    harmless = deployment.event("beforeShellExecution", command="ls", cwd=str(deployment.workspace))
    proc = run_client(["hook", "beforeShellExecution"], harmless, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout) == {"permission": "allow"}

    destructive = {**harmless, "command": "rm -rf /"}
    proc = run_client(["hook", "beforeShellExecution"], destructive, env=env)
    assert proc.returncode == 0
    answer = json.loads(proc.stdout)
    assert answer["permission"] == "deny" and "recursive delete" in answer["user_message"]

    # --exit-code mimics a single hook: exit 2 on a block, the message on stderr
    proc = run_client(["hook", "beforeShellExecution", "--exit-code"], destructive, env=env)
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["permission"] == "deny"
    assert "not allowed here" in proc.stderr.decode()
    proc = run_client(["hook", "beforeShellExecution", "--exit-code"], harmless, env=env)
    assert proc.returncode == 0

    daemon.stop()
    decisions = [r for r in deployment.records() if r["kind"] == "decision"]
    assert [d["decision"].get("permission") for d in decisions] == [
        "allow",
        "deny",
        "deny",
        "allow",
    ]
    assert verify_log(deployment.audit_log).ok


def test_warm_sessions_reuse_one_sandbox_per_conversation_and_source(
    warm: tuple[Deployment, DaemonProcess], docker_client: docker.DockerClient
) -> None:
    deployment, daemon = warm
    payload = deployment.event("beforeShellExecution", command="rm -rf /",
                               cwd=str(deployment.workspace))  # fmt: skip
    for _ in range(3):
        assert _answer(daemon.event("beforeShellExecution", payload))["permission"] == "deny"
    other = {**payload, "conversation_id": "conv-2"}
    assert _answer(daemon.event("beforeShellExecution", other))["permission"] == "deny"
    hooks = [r for r in deployment.records() if r["kind"] == "hook"]
    by_conversation: dict[str, set[str]] = {}
    for record in hooks:
        by_conversation.setdefault(record["conversation_id"], set()).add(record["sandbox_id"])
    assert len(by_conversation["conv-1"]) == 1, "three events, one warm sandbox"
    assert by_conversation["conv-1"] != by_conversation["conv-2"]
    running = docker_client.containers.list(
        filters={"label": f"cloudrunner.worker={deployment.worker_id}"}
    )
    assert len(running) == 2
    metrics = daemon.call("GET", "/metrics").body.decode()
    assert value(metrics, "cloudrunner_warm_sandboxes") == 2

    # a sandbox that died is replaced on the next event
    running[0].kill()
    for conversation in ("conv-1", "conv-2"):
        event = {**payload, "conversation_id": conversation}
        assert _answer(daemon.event("beforeShellExecution", event))["permission"] == "deny"

    # SIGTERM closes every warm sandbox and leaves an intact log
    assert daemon.stop() == 0
    left = docker_client.containers.list(
        all=True, filters={"label": f"cloudrunner.worker={deployment.worker_id}"}
    )
    assert left == []
    assert verify_log(deployment.audit_log).ok
    assert not daemon.socket_path.exists()


def test_the_client_imports_only_the_standard_library(
    warm: tuple[Deployment, DaemonProcess],
) -> None:
    deployment, daemon = warm
    payload = deployment.event("stop", status="completed", loop_count=0)
    script = (
        "import sys\n"
        "from cloudrunner.cli import main\n"
        "code = main(['hook', 'stop'])\n"
        "names = {m.split('.')[0] for m in sys.modules}\n"
        "extra = sorted(n for n in names - set(sys.stdlib_module_names) - {'cloudrunner'}"
        " if not n.startswith('_'))\n"
        "ours = sorted(m for m in sys.modules if m.startswith('cloudrunner'))\n"
        "print(repr((code, extra, ours)), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    done = subprocess.run(
        [sys.executable, "-c", script], input=json.dumps(payload).encode(), capture_output=True,
        env={**env, **_client_env(daemon)}, timeout=60, check=False,
    )  # fmt: skip
    code, extra, ours = eval(done.stderr.decode().strip().splitlines()[-1])
    assert code == 0
    assert json.loads(done.stdout)["followup_message"].startswith("TODO.md still has")
    assert extra == [], f"non-stdlib modules imported by the client: {extra}"
    assert ours == [
        "cloudrunner", "cloudrunner.cli", "cloudrunner.client", "cloudrunner.commands",
        "cloudrunner.commands.hook", "cloudrunner.errors",
    ]  # fmt: skip


def test_with_no_daemon_the_client_answers_by_policy_or_runs_in_process(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    tmp_path.chmod(0o755)
    deployment = make_deployment(tmp_path, docker_tracker.worker_id)
    deployment.isolation = "session"
    missing = {"CLOUDRUNNER_SOCKET": str(tmp_path / "no-daemon.sock")}
    destructive = deployment.event("beforeShellExecution", command="rm -rf /",
                                   cwd=str(deployment.workspace))  # fmt: skip

    proc = run_client(["hook", "beforeShellExecution"], destructive, env=missing)
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == {"permission": "allow"}
    lines = proc.stderr.decode().strip().splitlines()
    assert "no daemon answers" in lines[0] and "fail-open" in lines[0]
    # the daemon never published a fail policy in that directory: said, then fail-open
    assert len(lines) == 2 and lines[1].startswith("cloudrunner: no fail policy was published")

    proc = run_client(["hook", "beforeShellExecution", "--fail-closed", "--exit-code"],
                      destructive, env=missing)  # fmt: skip
    assert proc.returncode == 2
    answer = json.loads(proc.stdout)
    assert answer["permission"] == "deny" and "no daemon answers" in answer["agent_message"]

    # an event that cannot block is let through even fail-closed
    proc = run_client(["hook", "stop", "--fail-closed"], deployment.event("stop"), env=missing)
    assert proc.returncode == 0 and json.loads(proc.stdout) == {}

    # in-process fallback: the worker's settings come from the environment
    settings_env = {
        **missing,
        "CLOUDRUNNER_FALLBACK": "in-process",
        "CLOUDRUNNER_WORKER_ID": deployment.worker_id,
        "CLOUDRUNNER_REPO": deployment.origin.as_uri(),
        "CLOUDRUNNER_REF": "main",
        "CLOUDRUNNER_WORKSPACE": str(deployment.workspace),
        "CLOUDRUNNER_STATE_DIR": str(deployment.state),
        "CLOUDRUNNER_ENTERPRISE_HOOKS": str(deployment.enterprise / "hooks.json"),
        "CLOUDRUNNER_ISOLATION": "session",
    }
    proc = run_client(["hook", "beforeShellExecution"], destructive, env=settings_env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["permission"] == "deny"
    assert "running the event in process" in proc.stderr.decode()
    assert [r["kind"] for r in deployment.records()][-1] == "decision"


# --------------------------------------------------------------------------- the API


def test_health_readiness_metrics_and_openapi(warm: tuple[Deployment, DaemonProcess]) -> None:
    deployment, daemon = warm
    assert _answer(daemon.call("GET", "/healthz")) == {"status": "ok", **identity()}
    ready = _answer(daemon.call("GET", "/readyz"))
    assert ready["ready"] is True and ready["engine"] is True
    proc = run_client(["health", "--ready"], b"", env=_client_env(daemon))
    assert proc.returncode == 0, proc.stderr.decode()

    prompt = deployment.event("beforeSubmitPrompt", prompt="hello", attachments=[])
    assert _answer(daemon.event("beforeSubmitPrompt", prompt))["continue"] is True
    metrics = daemon.call("GET", "/metrics").body.decode()
    assert value(metrics, "cloudrunner_events_total", event="beforeSubmitPrompt",
                 result="answered") == 1  # fmt: skip
    assert value(metrics, "cloudrunner_hook_outcomes_total", source="enterprise", outcome="ok") == 1
    count = "cloudrunner_event_duration_seconds_count"
    assert value(metrics, count, event="beforeSubmitPrompt") == 1
    assert value(metrics, "cloudrunner_queue_depth") == 0

    spec = _answer(daemon.call("GET", "/openapi.json"))
    assert spec["openapi"].startswith("3.")
    assert {"/v1/events/{event}", "/v1/sessions", "/v1/sessions/{session}/gate"} <= set(
        spec["paths"]
    )
    mode = stat.S_IMODE(daemon.socket_path.stat().st_mode)
    assert mode == 0o600


def test_daemon_sessions_for_other_workspaces_with_their_own_gate(
    warm: tuple[Deployment, DaemonProcess], tmp_path: Path
) -> None:
    deployment, daemon = warm
    # another checkout, adopted in place
    other = tmp_path / "other"
    (other / ".cursor").mkdir(parents=True)
    (other / ".cursor" / "hooks.json").write_text(json.dumps({"version": 1, "hooks": {
        "beforeShellExecution": [{"command": "cat >/dev/null; echo '{\"permission\": \"deny\"}'"}]
    }}))  # fmt: skip
    committed_repo(other, "other", branch=None)
    other.chmod(0o777)
    created = daemon.call("POST", "/v1/sessions", {"workspace": str(other)})
    assert created.status == 201, created.body
    sid = json.loads(created.body)["session"]
    listed = _answer(daemon.call("GET", "/v1/sessions"))["sessions"]
    assert sid in [s["session"] for s in listed]

    event = {"hook_event_name": "beforeShellExecution", "conversation_id": "o1",
             "generation_id": "g", "command": "ls", "cwd": str(other),
             "workspace_roots": [str(other)]}  # fmt: skip
    assert _answer(daemon.event("beforeShellExecution", event, session=sid)) == {
        "permission": "deny"
    }
    # the default session still runs its own workspace's hooks
    harmless = deployment.event("beforeShellExecution", command="ls", cwd=str(deployment.workspace))
    assert _answer(daemon.event("beforeShellExecution", harmless))["permission"] == "allow"

    # that session's gate, closed: a neutral answer, no hook runs; the default is untouched
    assert _answer(daemon.call("POST", f"/v1/sessions/{sid}/gate", {"state": "closed"}))[
        "mode"
    ] == ("closed")
    assert _answer(daemon.event("beforeShellExecution", event, session=sid)) == {
        "permission": "allow"
    }
    assert _answer(daemon.event("beforeShellExecution", harmless))["permission"] == "allow"
    # (the harmless event's records: its `received` and its decision)
    assert [r for r in deployment.records() if r["kind"] != "received"][-2]["kind"] == "gated"
    daemon.call("POST", f"/v1/sessions/{sid}/gate", {"state": "auto"})
    assert _answer(daemon.event("beforeShellExecution", event, session=sid)) == {
        "permission": "deny"
    }

    closed = _answer(daemon.call("DELETE", f"/v1/sessions/{sid}"))
    assert closed["closed_sandboxes"] == 1
    assert _error(daemon.event("beforeShellExecution", event, session=sid)) == (
        404, "unknown-session"
    )  # fmt: skip
    assert _error(daemon.call("DELETE", "/v1/sessions/default")) == (409, "default-session")
    assert _error(daemon.call("POST", "/v1/sessions", {"workspace": "relative"})) == (
        400, "invalid-request"
    )  # fmt: skip
    assert _error(daemon.call("POST", "/v1/sessions", {"repo": "x", "workspace": "/x"})) == (
        400, "invalid-request"
    )  # fmt: skip


def test_malformed_oversized_and_unknown_requests_get_json_errors(
    warm: tuple[Deployment, DaemonProcess],
) -> None:
    deployment, daemon = warm
    assert _error(daemon.call("POST", "/v1/events/stop", b"{not json")) == (400, "payload-not-json")
    assert _error(daemon.call("POST", "/v1/events/stop", b"[1, 2]")) == (400, "payload-not-json")
    assert _error(daemon.event("noSuchEvent", deployment.event("noSuchEvent"))) == (
        404, "unknown-event"
    )  # fmt: skip
    assert _error(daemon.event("workspaceOpen", deployment.event("workspaceOpen"))) == (
        422, "event-not-in-cloud"
    )  # fmt: skip
    bad_types = deployment.event("beforeShellExecution", command=42)
    assert _error(daemon.event("beforeShellExecution", bad_types)) == (400, "payload-invalid")
    huge = b'{"x": "' + b"a" * (5 * 1024 * 1024) + b'"}'
    assert _error(daemon.call("POST", "/v1/events/stop", huge)) == (413, "payload-too-large")
    assert _error(daemon.call("GET", "/v1/nothing")) == (404, "not-found")
    assert _error(daemon.call("GET", "/v1/events/stop")) == (405, "method-not-allowed")
    assert _error(daemon.call("GET", "/v1/sessions/nope")) == (404, "unknown-session")

    # no Content-Length
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(daemon.socket_path))
        sock.sendall(b"POST /v1/events/stop HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        raw = b"".join(iter(lambda: sock.recv(65536), b""))
    assert raw.startswith(b"HTTP/1.1 411")

    refused = [r for r in deployment.records() if r["kind"] == "refused"]
    assert len(refused) >= 6  # every refused event is in the audit log, the oversized one too
    assert any("over the" in r["reason"] for r in refused)
    metrics = daemon.call("GET", "/metrics").body.decode()
    assert value(metrics, "cloudrunner_events_total", event="other", result="refused") == 1

    # through the client, the daemon's refusal is the policy's answer with one line
    proc = run_client(["hook", "stop"], b"{oops", env=_client_env(daemon))
    assert proc.returncode == 0 and json.loads(proc.stdout) == {}
    assert "the daemon refused the event" in proc.stderr.decode()


def test_tcp_needs_the_bearer_token(tmp_path: Path, docker_tracker: DockerTracker) -> None:
    tmp_path.chmod(0o755)
    deployment = make_deployment(tmp_path, docker_tracker.worker_id)
    deployment.isolation = "session"
    token_file = tmp_path / "token"
    token_file.write_text("s3cr3t-token-0123456789abcdef\n")
    daemon = _serve(deployment, "--listen", "127.0.0.1:0", "--token-file", str(token_file))
    daemon.start()
    try:
        assert daemon.tcp is not None
        assert _error(request(daemon.tcp_endpoint(None), "GET", "/healthz")) == (
            401,
            "unauthorized",
        )
        assert _error(request(daemon.tcp_endpoint("wrong"), "GET", "/healthz")) == (
            401, "unauthorized"
        )  # fmt: skip
        good = daemon.tcp_endpoint("s3cr3t-token-0123456789abcdef")
        assert _answer(request(good, "GET", "/healthz")) == {"status": "ok", **identity()}
        payload = deployment.event("beforeShellExecution", command="rm -rf /",
                                   cwd=str(deployment.workspace))  # fmt: skip
        url = f"http://{daemon.tcp[0]}:{daemon.tcp[1]}"
        proc = run_client(["hook", "beforeShellExecution", "--url", url], payload,
                          env={"CLOUDRUNNER_TOKEN_FILE": str(token_file)})  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
        assert json.loads(proc.stdout)["permission"] == "deny"
        proc = run_client(["hook", "beforeShellExecution", "--url", url], payload, env={})
        assert "bearer" in proc.stderr.decode().lower()
    finally:
        daemon.stop()

    # --listen without a token file is refused at start, with the fix
    refused = _serve(deployment, "--listen", "127.0.0.1:0")
    with pytest.raises(AssertionError, match="--listen needs --token-file"):
        refused.start(timeout_s=60)


# --------------------------------------------------------------------------- concurrency


def test_a_client_that_disconnects_mid_request_still_gets_its_event_recorded(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    deployment = _slow_deployment(tmp_path, docker_tracker)
    daemon = _serve(deployment).start()
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(daemon.socket_path))
            body = json.dumps(deployment.event("stop", status="completed")).encode()
            sock.sendall(
                b"POST /v1/events/stop HTTP/1.1\r\nHost: x\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\n\r\n" + body
            )  # fmt: skip
        # the client is gone; the event goes on and is recorded
        wait_for(lambda: any(r["kind"] == "decision" for r in deployment.records(missing_ok=True)))
        decision = [r for r in deployment.records(missing_ok=True) if r["kind"] == "decision"][-1]
        assert decision["event"] == "stop"
        hook = [r for r in deployment.records(missing_ok=True) if r["kind"] == "hook"][-1]
        assert hook["outcome"] == "ok"
        assert _answer(daemon.call("GET", "/healthz")) == {"status": "ok", **identity()}
    finally:
        daemon.stop()


def test_two_hundred_concurrent_requests_over_eight_sessions(
    warm: tuple[Deployment, DaemonProcess],
) -> None:
    deployment, daemon = warm
    answers: list[dict[str, Any]] = []
    lock = threading.Lock()

    def send(index: int) -> None:
        payload = deployment.event(
            "beforeShellExecution",
            command="rm -rf /" if index % 2 else "ls",
            cwd=str(deployment.workspace),
            conversation_id=f"conv-{index % 8}",
            generation_id=f"gen-{index}",
        )
        reply = daemon.event("beforeShellExecution", payload)
        with lock:
            answers.append({"index": index, **_answer(reply)})

    failures = run_in_threads(200, send, timeout_s=300)
    assert failures == []
    assert len(answers) == 200
    for answer in answers:
        assert answer["permission"] == ("deny" if answer["index"] % 2 else "allow")
    daemon.stop()
    decisions = [r for r in deployment.records() if r["kind"] == "decision"]
    assert len(decisions) == 200
    assert len({d["generation_id"] for d in decisions}) == 200
    assert verify_log(deployment.audit_log).ok


def test_a_slow_hook_in_one_session_does_not_hold_up_another(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    deployment = _slow_deployment(tmp_path, docker_tracker, seconds=20, until=".release")
    release = deployment.workspace / ".release"
    daemon = _serve(deployment).start()
    try:
        slow_done = threading.Event()

        def slow() -> None:
            daemon.event("stop", deployment.event("stop", status="completed",
                                                 conversation_id="slow"))  # fmt: skip
            slow_done.set()

        thread = threading.Thread(target=slow)
        thread.start()
        wait_for(lambda: _hook_running(docker_tracker, deployment))
        fast = deployment.event("beforeShellExecution", command="ls",
                                cwd=str(deployment.workspace), conversation_id="fast")  # fmt: skip
        for _ in range(3):
            assert _answer(daemon.event("beforeShellExecution", fast))["permission"] == "allow"
        assert not slow_done.is_set(), (
            "the fast session's events were answered while the slow hook ran"
        )
        release.touch()
        thread.join(120)
        assert slow_done.is_set()
    finally:
        if deployment.workspace.exists():
            release.touch()
        daemon.stop()


def _hook_running(tracker: DockerTracker, deployment: Deployment) -> bool:
    for container in tracker.labelled_containers():
        if container.status == "running":
            top = container.top()
            if any("sleep" in " ".join(proc) for proc in top.get("Processes") or []):
                return True
    return False


# --------------------------------------------------------------------------- stopping


def test_sigterm_drains_the_event_in_flight(tmp_path: Path, docker_tracker: DockerTracker) -> None:
    deployment = _slow_deployment(tmp_path, docker_tracker, seconds=4)
    daemon = _serve(deployment).start()
    result: dict[str, Any] = {}

    def slow() -> None:
        result["reply"] = daemon.event("stop", deployment.event("stop", status="completed"))

    thread = threading.Thread(target=slow)
    thread.start()
    wait_for(lambda: _hook_running(docker_tracker, deployment))
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGTERM)
    # new connections are refused while the daemon drains
    wait_for(lambda: not daemon.socket_path.exists() or _refuses(daemon))
    thread.join(120)
    assert daemon.proc.wait(120) == 0
    assert "cloudrunner: stopped" in daemon.stderr_lines[-1]
    assert _answer(result["reply"]) == {}
    hook = [r for r in deployment.records() if r["kind"] == "hook"][-1]
    assert hook["outcome"] == "ok", "the hook in flight finished instead of being killed"
    assert verify_log(deployment.audit_log).ok
    assert docker_tracker.labelled_containers() == []


def _refuses(daemon: DaemonProcess) -> bool:
    try:
        daemon.call("GET", "/healthz", connect_timeout_s=1)
    except Unreachable:
        return True
    return False


def test_after_sigkill_a_new_daemon_reaps_and_carries_on(
    warm: tuple[Deployment, DaemonProcess], docker_tracker: DockerTracker
) -> None:
    deployment, daemon = warm
    stop = deployment.event("stop", status="completed", loop_count=0)
    first = _answer(daemon.event("stop", stop))
    assert "followup_message" in first
    assert daemon.proc is not None
    left = [c.id[:12] for c in docker_tracker.labelled_containers()]
    assert left, "a warm sandbox was running"
    daemon.proc.kill()
    daemon.proc.wait(30)
    assert daemon.socket_path.exists(), "a killed daemon leaves its socket behind"

    daemon.start()  # the same state directory, audit log and worker id
    reaped = [r for r in deployment.records() if r["kind"] == "reaped"]
    assert {r["container_id"] for r in reaped} >= set(left)
    # the loop count survived: loop_limit 2 allows one more follow-up, then none
    second = _answer(daemon.event("stop", {**stop, "loop_count": 1}))
    assert "followup_message" in second
    third = _answer(daemon.event("stop", {**stop, "loop_count": 2}))
    assert "followup_message" not in third
    assert verify_log(deployment.audit_log).ok


def test_sigkill_during_an_event_fails_the_request_loudly_and_keeps_the_chain(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    deployment = _slow_deployment(tmp_path, docker_tracker, seconds=30)
    daemon = _serve(deployment).start()
    env = _client_env(daemon)
    result: dict[str, Any] = {}

    def call() -> None:
        result["proc"] = run_client(["hook", "stop"], deployment.event("stop"), env=env)

    thread = threading.Thread(target=call)
    thread.start()
    wait_for(lambda: _hook_running(docker_tracker, deployment))
    assert daemon.proc is not None
    daemon.proc.kill()
    daemon.proc.wait(30)
    thread.join(120)
    proc = result["proc"]
    assert proc.returncode == 0 and json.loads(proc.stdout) == {}
    assert "dropped the connection" in proc.stderr.decode() or "closed without" in (
        proc.stderr.decode()
    )
    daemon.start()
    try:
        assert _answer(daemon.call("GET", "/healthz")) == {"status": "ok", **identity()}
        assert [r["kind"] for r in deployment.records()].count("reaped") >= 1
        report = verify_log(deployment.audit_log)
        # the chain holds; the killed event is reported as incomplete by its received seq
        assert report.problems == [] and report.verdict == "incomplete"
        (lost,) = report.incomplete
        (received,) = [r for r in deployment.records() if r["kind"] == "received"]
        assert lost.seq == received["seq"]
    finally:
        daemon.stop()


def test_a_second_daemon_on_the_same_socket_is_refused(
    warm: tuple[Deployment, DaemonProcess],
) -> None:
    deployment, _ = warm
    second = _serve(deployment)
    with pytest.raises(AssertionError, match="another daemon already listens"):
        second.start(timeout_s=60)


# --------------------------------------------------------------------------- helpers


def _slow_deployment(
    tmp_path: Path, tracker: DockerTracker, seconds: int = 3, *, until: str | None = None
) -> Deployment:
    """The demo deployment whose `stop` hook sleeps, in session isolation; with `until`,
    it ends as soon as that file appears in the workspace (at most `seconds` later)."""
    tmp_path.chmod(0o755)
    deployment = make_deployment(tmp_path, tracker.worker_id)
    deployment.isolation = "session"
    src = tmp_path / "src"
    hooks = json.loads((src / ".cursor" / "hooks.json").read_text())
    command = SLOW_HOOK.replace("${SLOW:-3}", str(seconds))
    if until is not None:
        wait = f"for i in $(seq {seconds * 10}); do [ -e {until} ] && break; sleep 0.1; done"
        command = command.replace(f'sleep "{seconds}"', wait)
    hooks["hooks"]["stop"] = [{"command": command, "timeout": seconds + 30}]
    (src / ".cursor" / "hooks.json").write_text(json.dumps(hooks))
    git(src, "commit", "-qam", "slow stop hook")
    git(src, "push", "-q", str(deployment.origin), "main")
    return deployment
