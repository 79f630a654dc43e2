"""Hostile and careless input end to end (issue 15, classes 1-4): matchers that would
backtrack for ever, payloads that cannot be encoded, and a disk that fills up, through
`cloudrunner run` and through `cloudrunner serve` + `cloudrunner hook`, with real
containers and a real (small) tmpfs."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudrunner.audit import verify_log
from tests.e2e.conftest import Deployment, make_deployment
from tests.support.daemon_process import DaemonProcess, daemon_process, run_client
from tests.support.docker_tracking import DockerTracker
from tests.support.mounts import fill, small_tmpfs
from tests.support.waiting import wait_for

pytestmark = pytest.mark.docker

#: a subject every backtracking engine needs ages for under EXPLOSIVE
SUBJECT = "a" * 60 + "!"
EXPLOSIVE = "^(a|aa)+$"


@pytest.fixture
def deployment(tmp_path: Path, docker_tracker: DockerTracker) -> Deployment:
    """The demo deployment, cloned once (hook isolation)."""
    tmp_path.chmod(0o755)
    deployed = make_deployment(tmp_path, docker_tracker.worker_id)
    deployed.answer(deployed.event("stop", status="aborted"))  # clones the workspace
    return deployed


def _project_hooks(deployment: Deployment, hooks: list[dict[str, Any]]) -> None:
    path = deployment.workspace / ".cursor" / "hooks.json"
    path.write_text(json.dumps({"version": 1, "hooks": {"beforeShellExecution": hooks}}))


def _marker_hook(name: str, **extra: Any) -> dict[str, Any]:
    """A hook that leaves `name` in the workspace when it runs, and denies."""
    answer = json.dumps({"permission": "deny", "agent_message": f"{name} ran"})
    return {"command": f"cat >/dev/null; touch {name}; echo '{answer}'", "timeout": 120, **extra}


def _redos_hooks() -> list[dict[str, Any]]:
    return [
        _marker_hook("nested", matcher="^(a+)+$", failClosed=True),
        _marker_hook("alternation", matcher="(a|aa)*c"),
        _marker_hook("explosive", matcher=EXPLOSIVE, failClosed=True),
        {"command": 'cat >/dev/null; echo \'{"permission": "allow"}\'', "matcher": "a!$"},
    ]


def _check_redos_records(records: list[dict[str, Any]], budget_ms: int) -> None:
    received = [r for r in records if r["kind"] == "received"][-1]
    hooks = [r for r in records if r["kind"] == "hook" and r["event_seq"] == received["seq"]]
    by_matcher = {h["matcher"]: h for h in hooks}
    timed_out = by_matcher[EXPLOSIVE]
    assert timed_out["outcome"] == "match_timeout"
    assert f"after its {budget_ms} ms budget" in timed_out["reason"]
    assert "failClosed, so it blocks" in timed_out["merge_use"]
    assert by_matcher["a!$"]["outcome"] == "ok"  # ran in its container
    assert by_matcher["a!$"]["sandbox_id"]
    # the two shapes of the issue do not match: never run, nothing recorded as run
    assert "^(a+)+$" not in by_matcher and "(a|aa)*c" not in by_matcher
    assert len(received["hooks"]) == 1
    decision = [r for r in records if r["kind"] == "decision"][-1]
    assert decision["event_seq"] == received["seq"]


def test_catastrophic_matchers_are_answered_within_their_budget_through_run(
    deployment: Deployment,
) -> None:
    _project_hooks(deployment, _redos_hooks())
    event = deployment.event("beforeShellExecution", command=SUBJECT, cwd="/")
    proc = deployment.run(event, env={"CLOUDRUNNER_MATCHER_TIMEOUT_MS": "20"})
    assert proc.returncode == 0, proc.stderr.decode()
    answer = json.loads(proc.stdout)
    assert answer["permission"] == "deny"
    assert "match_timeout" in answer["agent_message"]
    assert not any((deployment.workspace / n).exists() for n in ("nested", "alternation"))
    _check_redos_records(deployment.records(), 20)
    assert verify_log(deployment.audit_log).ok
    # the subjects: 40 a's and a '!' under the two patterns, answered
    event = deployment.event("beforeShellExecution", command="a" * 40 + "!", cwd="/")
    _project_hooks(deployment, _redos_hooks()[:2])
    assert deployment.answer(event) == {"permission": "allow"}


@pytest.fixture
def served(deployment: Deployment) -> Iterator[DaemonProcess]:
    daemon = daemon_process(
        [*deployment.flags()], state=deployment.state, worker_id=deployment.worker_id
    ).start()
    try:
        yield daemon
    finally:
        daemon.stop()


def test_catastrophic_matchers_stall_no_one_through_serve(
    deployment: Deployment, served: DaemonProcess
) -> None:
    _project_hooks(deployment, _redos_hooks())
    env = {"CLOUDRUNNER_SOCKET": str(served.socket_path)}
    event = deployment.event("beforeShellExecution", command=SUBJECT, cwd="/")
    proc = run_client(["hook", "beforeShellExecution"], event, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "match_timeout" in json.loads(proc.stdout)["agent_message"]
    assert served.call("GET", "/healthz").status == 200
    other = {**event, "conversation_id": "conv-2", "command": "ls"}
    assert json.loads(run_client(["hook", "beforeShellExecution"], other, env=env).stdout) == {
        "permission": "allow"
    }
    served.stop()
    _check_redos_records(
        [r for r in deployment.records() if r.get("conversation_id") == "conv-1"], 50
    )
    assert verify_log(deployment.audit_log).ok


def test_a_long_search_stalls_no_other_session_or_health_check_in_serve(
    deployment: Deployment,
) -> None:
    """With a generous budget (5 s of CPU) one explosive search runs for seconds; meanwhile
    `/healthz` and another conversation's event are answered. Python's `re` held the GIL for
    the whole search, so there both waited for it to end."""
    _project_hooks(deployment, _redos_hooks())
    daemon = daemon_process(
        [*deployment.flags()], state=deployment.state, worker_id=deployment.worker_id,
        env={"CLOUDRUNNER_MATCHER_TIMEOUT_MS": "5000"},
    ).start()  # fmt: skip
    try:
        env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
        event = deployment.event("beforeShellExecution", command="a" * 200 + "!", cwd="/")
        result: dict[str, Any] = {}
        slow = threading.Thread(
            target=lambda: result.update(proc=run_client(["hook", "beforeShellExecution"],
                                                         event, env=env))
        )  # fmt: skip
        slow.start()

        def in_flight() -> bool:
            assert slow.is_alive(), result
            return "cloudrunner_events_in_flight 1" in daemon.call("GET", "/metrics").body.decode()

        wait_for(in_flight, "the search in flight", timeout_s=120, interval_s=0.05)
        assert daemon.call("GET", "/healthz").status == 200
        other = {**event, "conversation_id": "conv-2", "command": "ls"}
        answered = run_client(["hook", "beforeShellExecution"], other, env=env)
        assert json.loads(answered.stdout) == {"permission": "allow"}
        assert slow.is_alive(), "the search ended before the other requests were answered"
        slow.join(300)
        assert "match_timeout" in json.loads(result["proc"].stdout)["agent_message"]
    finally:
        daemon.stop()
    assert verify_log(deployment.audit_log).ok


# --------------------------------------------------------------------------- payloads


UNENCODABLE = [
    (b'{"conversation_id": "c\\ud800", "hook_event_name": "beforeShellExecution"}',
     "lone UTF-16 surrogate"),
    (b'{"hook_event_name": "beforeShellExecution", "tool_input": ' + b"[" * 980
     + b"]" * 980 + b"}", "nested deeper than 64 levels"),
    (b'{"hook_event_name": "beforeShellExecution", "conversation_id": "c\\u0000"}',
     "holds a NUL"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "says"), UNENCODABLE)
def test_unencodable_payloads_are_refused_in_one_line_before_any_hook(
    deployment: Deployment, raw: bytes, says: str
) -> None:
    _project_hooks(deployment, [_marker_hook("ran")])
    proc = deployment.run(raw)
    assert proc.returncode == 2
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
    assert "Traceback" not in proc.stderr.decode()
    assert not (deployment.workspace / "ran").exists()
    refused = deployment.records()[-1]
    assert refused["kind"] == "refused" and says in refused["reason"]
    assert verify_log(deployment.audit_log).ok


def test_unencodable_payloads_are_a_400_through_serve(
    deployment: Deployment, served: DaemonProcess
) -> None:
    _project_hooks(deployment, [_marker_hook("ran", failClosed=True)])
    env = {"CLOUDRUNNER_SOCKET": str(served.socket_path)}
    for raw, says in UNENCODABLE:
        reply = served.call("POST", "/v1/events/beforeShellExecution", raw)
        assert reply.status == 400
        error = json.loads(reply.body)["error"]
        assert error["code"] == "payload-unencodable" and says in error["message"]
        # the client applies its policy to the refusal
        closed = run_client(["hook", "beforeShellExecution", "--fail-closed"], raw, env=env)
        assert json.loads(closed.stdout)["permission"] == "deny"
        assert says in closed.stderr.decode()
    assert not (deployment.workspace / "ran").exists()
    served.stop()
    refused = [r for r in deployment.records() if r["kind"] == "refused"]
    assert len(refused) == 2 * len(UNENCODABLE)
    assert verify_log(deployment.audit_log).ok


# --------------------------------------------------------------------------- disk full


def _on(deployment: Deployment, state: Path) -> list[str]:
    """The deployment's flags with its state and audit log moved to `state`."""
    flags = deployment.flags()
    flags[flags.index("--state-dir") + 1] = str(state)
    flags[flags.index("--audit-log") + 1] = str(state / "audit.log")
    return flags


def test_a_full_disk_before_the_event_runs_no_hook_and_fails_loudly_through_run(
    deployment: Deployment, tmp_path: Path
) -> None:
    _project_hooks(deployment, [_marker_hook("ran", failClosed=True)])
    with small_tmpfs(tmp_path / "full") as state:
        fill(state)
        event = deployment.event("beforeShellExecution", command="rm -rf /")
        proc = deployment.run(event, flags=_on(deployment, state))
        assert proc.returncode == 74, proc.stderr.decode()
        assert proc.stdout == b""
        lines = proc.stderr.decode().strip().splitlines()
        assert len(lines) == 1, lines
        assert "was not run: its first audit record could not be written" in lines[0]
        assert "No space left on device" in lines[0]
    assert not (deployment.workspace / "ran").exists()


def _holding_hooks() -> list[dict[str, Any]]:
    """Three hooks that deny after the test creates `go` (and write 3000 bytes to stderr:
    records too big for what a page of the full disk can still take)."""
    hold = "cat >/dev/null; touch started-{n}; while [ ! -e go ]; do sleep 0.1; done; " + (
        "head -c 3000 /dev/zero | tr '\\0' x >&2; echo '{{\"permission\": \"deny\"}}'"
    )
    return [{"command": hold.format(n=n), "timeout": 120} for n in range(3)]


def _wait_for_hooks(deployment: Deployment, alive: Callable[[], bool]) -> None:
    started = [deployment.workspace / f"started-{n}" for n in range(3)]

    def all_started() -> bool:
        assert alive(), "the worker ended before its hooks started"
        return all(p.exists() for p in started)

    wait_for(all_started, "every hook started", timeout_s=240)


def test_a_disk_that_fills_while_hooks_run_keeps_the_answer_and_verify_says_incomplete(
    deployment: Deployment, tmp_path: Path
) -> None:
    _project_hooks(deployment, _holding_hooks())
    with small_tmpfs(tmp_path / "full") as state:
        flags = _on(deployment, state)
        event = deployment.event("beforeShellExecution", command="rm -rf /", note="x" * 8000)
        payload = tmp_path / "payload.json"
        payload.write_text(json.dumps(event))
        with payload.open("rb") as stdin:
            proc = subprocess.Popen(
                [sys.executable, "-m", "cloudrunner", "run", *flags],
                stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=deployment.base_env(),
            )  # fmt: skip
        _wait_for_hooks(deployment, lambda: proc.poll() is None)
        received = json.loads((state / "audit.log").read_text().splitlines()[-1])
        assert received["kind"] == "received" and len(received["hooks"]) == 3
        fill(state)
        (deployment.workspace / "go").touch()
        stdout, stderr = proc.communicate(timeout=240)
        assert proc.returncode == 0, stderr.decode()
        # the hooks denied: the answer follows them although their records are lost
        assert json.loads(stdout)["permission"] == "deny"
        text = stderr.decode()
        assert "Traceback" not in text
        assert f"received as seq {received['seq']}) could not be written" in text
        report = verify_log(state / "audit.log")
        assert not report.ok
        assert [p.seq for p in report.incomplete] == [received["seq"]]


def test_a_full_disk_is_a_503_through_serve_and_the_client_applies_its_policy(
    deployment: Deployment, tmp_path: Path
) -> None:
    _project_hooks(deployment, [_marker_hook("ran", failClosed=True)])
    with small_tmpfs(tmp_path / "full") as state:
        daemon = daemon_process(
            _on(deployment, state), state=state, worker_id=deployment.worker_id
        ).start()
        try:
            fill(state)
            event = deployment.event("beforeShellExecution", command="rm -rf /")
            reply = daemon.event("beforeShellExecution", event)
            assert reply.status == 503
            error = json.loads(reply.body)["error"]
            assert error["code"] == "audit-unwritable"
            assert "No space left on device" in error["message"]
            env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
            closed = run_client(["hook", "beforeShellExecution", "--fail-closed"], event, env=env)
            assert closed.returncode == 0, closed.stderr.decode()
            assert json.loads(closed.stdout)["permission"] == "deny"
            assert "first audit record could not be written" in closed.stderr.decode()
            opened = run_client(["hook", "beforeShellExecution", "--fail-open"], event, env=env)
            assert json.loads(opened.stdout)["permission"] == "allow"
            assert "fail-open" in opened.stderr.decode()
            # no flag: the policy the daemon published at start (a failClosed hook) decides
            by_policy = run_client(["hook", "beforeShellExecution"], event, env=env)
            assert json.loads(by_policy.stdout)["permission"] == "deny"
            assert "a failClosed hook is configured for beforeShellExecution" in (
                by_policy.stderr.decode()
            )
            # the daemon answered (it refused the event itself): nothing is spooled
            assert not (state / "fallback.spool").exists()
            assert daemon.call("GET", "/healthz").status == 200
        finally:
            daemon.stop()
    assert not (deployment.workspace / "ran").exists()


# --------------------------------------------------------------------------- properties

_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=["Cs"]), max_size=10)
_ODD = st.sampled_from(["\ud800", "\x00", "\udfff x", "a" * 70 + "!", "\u2028", "é"])
_LEAF = st.none() | st.integers() | _TEXT | _ODD


@given(
    command=_TEXT | _ODD,
    conversation=_TEXT | _ODD,
    extra=st.dictionaries(_TEXT, st.recursive(_LEAF, lambda inner: st.lists(inner, max_size=3),
                                              max_leaves=8), max_size=3),
    depth=st.sampled_from([0, 10, 63, 64, 300]),
)  # fmt: skip
@settings(
    max_examples=8, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # fmt: skip
def test_any_payload_through_run_is_answered_or_refused_and_every_hook_that_ran_is_recorded(
    deployment: Deployment, command: str, conversation: str, extra: dict[str, Any], depth: int
) -> None:
    _project_hooks(
        deployment,
        [_marker_hook("p1", matcher="."), _marker_hook("p2", matcher="(a|aa)+!$"),
         {"command": "cat >/dev/null; echo '{}'", "matcher": "^(a+)+$", "failClosed": True}],
    )  # fmt: skip
    nested: Any = "leaf"
    for _ in range(depth):
        nested = {"n": nested}
    event = {**extra, **deployment.event("beforeShellExecution", command=command, cwd="/")}
    event["conversation_id"] = conversation
    event["tool_input"] = nested
    before = len(deployment.records())
    proc = deployment.run(json.dumps(event).encode())  # ensure_ascii: surrogates as escapes
    stderr = proc.stderr.decode()
    assert "Traceback" not in stderr
    new = deployment.records()[before:]
    if proc.returncode == 2:
        assert len(stderr.strip().splitlines()) == 1
        assert [r["kind"] for r in new] == ["refused"]
    else:
        assert proc.returncode == 0, stderr
        assert json.loads(proc.stdout)["permission"] in ("allow", "deny")
        received = new[0]
        assert received["kind"] == "received"
        ran = {r["source_file"] + str(r["hook_index"]) for r in new
               if r["kind"] == "hook" and r.get("sandbox_id")}  # fmt: skip
        assert len(ran) == len(received["hooks"])  # every hook that ran has its record
        assert all(r.get("event_seq") == received["seq"] for r in new[1:])
        assert new[-1]["kind"] == "decision"
    report = verify_log(deployment.audit_log)
    assert report.ok, (report.problems, report.incomplete)


def test_a_disk_that_fills_while_hooks_run_through_serve_keeps_the_answer(
    deployment: Deployment, tmp_path: Path
) -> None:
    _project_hooks(deployment, _holding_hooks())
    with small_tmpfs(tmp_path / "full") as state:
        daemon = daemon_process(
            _on(deployment, state), state=state, worker_id=deployment.worker_id
        ).start()
        try:
            env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
            event = deployment.event("beforeShellExecution", command="rm -rf /", note="x" * 8000)
            result: dict[str, Any] = {}
            client = threading.Thread(
                target=lambda: result.update(
                    proc=run_client(["hook", "beforeShellExecution"], event, env=env)
                )
            )
            client.start()
            _wait_for_hooks(deployment, client.is_alive)
            received = json.loads((state / "audit.log").read_text().splitlines()[-1])
            assert received["kind"] == "received"
            fill(state)
            (deployment.workspace / "go").touch()
            client.join(240)
            proc = result["proc"]
            assert proc.returncode == 0, proc.stderr.decode()
            assert json.loads(proc.stdout)["permission"] == "deny"  # the hooks' answer
            assert daemon.call("GET", "/healthz").status == 200
        finally:
            daemon.stop()
        assert any("could not be written" in line for line in daemon.stderr_lines)
        report = verify_log(state / "audit.log")
        assert [p.seq for p in report.incomplete] == [received["seq"]]
