"""One behaviour, two clients: every client case runs the Python `cloudrunner hook` and the
compiled `cloudrunner-hook` on the same input, against a real `cloudrunner serve` (hooks in
real containers) or a small real fake server for a fault, and a difference in exit code,
stdout or stderr between them fails the test (tests/support/two_clients.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudrunner.protocol.events import CLOUD_EVENTS, neutral_answer
from tests.conftest import WORKER_ID_PREFIX
from tests.e2e.conftest import Deployment, make_deployment
from tests.support.daemon_process import DaemonProcess, daemon_process
from tests.support.docker_tracking import DockerTracker
from tests.support.two_clients import (
    CLIENTS,
    Outcome,
    fake_daemon,
    http_answer,
    missing_client,
    run_both,
)

TOKEN = "clients-token-0123456789abcdef"
DRAINING = json.dumps({"error": {"code": "draining", "message": "the daemon is shutting down; "
                                 "send the event again to its successor"}}).encode()  # fmt: skip
AUDIT_UNWRITABLE = json.dumps({"error": {"code": "audit-unwritable", "message": "the audit log "
                                         "cannot be written: disk full"}}).encode()  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _both_clients_installed() -> None:
    why = missing_client()
    if why:
        pytest.fail(why, pytrace=False)  # a missing client is a failure, never a skip


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, docker_client: docker.DockerClient
) -> Iterator[tuple[Deployment, DaemonProcess]]:
    """The demo deployment behind one daemon (session isolation) on its unix socket and on
    loopback TCP with a bearer token, for the whole module."""
    tracker = DockerTracker(docker_client, worker_id=f"{WORKER_ID_PREFIX}-{uuid.uuid4().hex[:12]}")
    base = tmp_path_factory.mktemp("clients")
    base.chmod(0o755)
    deployment = make_deployment(base, tracker.worker_id)
    deployment.isolation = "session"
    token_file = base / "token"
    token_file.write_text(TOKEN + "\n")
    daemon = daemon_process(
        [*deployment.flags(), "--listen", "127.0.0.1:0", "--token-file", str(token_file)],
        state=deployment.state, worker_id=deployment.worker_id,
    )  # fmt: skip
    try:
        daemon.start()
        yield deployment, daemon
    finally:
        daemon.kill() if daemon.proc is None else daemon.stop()
        leftovers = tracker.cleanup()
    assert not leftovers, f"containers left running were removed: {leftovers}"


def _env(daemon: DaemonProcess) -> dict[str, str]:
    return {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}


def _payload(deployment: Deployment, event: str, **fields: Any) -> bytes:
    return json.dumps(deployment.event(event, **fields)).encode()


def _answer(outcome: Outcome) -> dict[str, Any]:
    value = json.loads(outcome.stdout)
    assert isinstance(value, dict)
    return value


# --------------------------------------------------------------------------- a real daemon


@pytest.mark.parametrize("event", CLOUD_EVENTS)
def test_every_cloud_event_gets_the_same_answer(
    served: tuple[Deployment, DaemonProcess], event: str
) -> None:
    deployment, daemon = served
    fields: dict[str, Any] = {"cwd": str(deployment.workspace)}
    if event == "beforeShellExecution":
        fields["command"] = "ls"
    payload = _payload(deployment, event, **fields)
    outcome = run_both(["hook", event], payload, _env(daemon))
    assert outcome.code == 0, outcome
    assert outcome.stderr == ""
    # the daemon's own answer, passed through untouched by both (not for stop: its
    # loop_limit makes a third stop in the conversation answer differently)
    if event != "stop":
        direct = daemon.call("POST", f"/v1/events/{event}", payload)
        assert direct.status == 200 and outcome.stdout == direct.body
    assert set(_answer(outcome)) >= set(neutral_answer(event))


def test_the_in_process_fallback_runs_the_event_without_a_daemon(
    served: tuple[Deployment, DaemonProcess], tmp_path: Path
) -> None:
    deployment, _ = served
    sock = tmp_path / "state" / "cloudrunner.sock"
    env = {
        "CLOUDRUNNER_SOCKET": str(sock),
        "CLOUDRUNNER_FALLBACK": "in-process",
        "CLOUDRUNNER_WORKER_ID": deployment.worker_id,
        "CLOUDRUNNER_REPO": deployment.origin.as_uri(),
        "CLOUDRUNNER_REF": "main",
        "CLOUDRUNNER_WORKSPACE": str(tmp_path / "workspace"),
        "CLOUDRUNNER_STATE_DIR": str(tmp_path / "state"),
        "CLOUDRUNNER_ENTERPRISE_HOOKS": str(deployment.enterprise / "hooks.json"),
        "CLOUDRUNNER_ISOLATION": "hook",
    }
    tmp_path.chmod(0o755)
    payload = json.dumps({**deployment.event("beforeShellExecution", command="rm -rf /"),
                          "workspace_roots": [str(tmp_path / "workspace")],
                          "cwd": str(tmp_path / "workspace")}).encode()  # fmt: skip
    outcome = run_both(["hook", "beforeShellExecution", "--exit-code"], payload, env)
    assert outcome.code == 2, outcome
    assert _answer(outcome)["permission"] == "deny"
    assert outcome.lines[0] == (
        f"cloudrunner: no daemon answers on unix:{sock} (the socket does not exist); "
        "running the event in process"
    )
    # recorded in the audit log by the run itself, so not spooled
    assert not (tmp_path / "state" / "fallback.spool").exists()


def test_a_block_under_exit_code_exits_2_with_its_message(
    served: tuple[Deployment, DaemonProcess],
) -> None:
    deployment, daemon = served
    payload = _payload(deployment, "beforeShellExecution", command="rm -rf /",
                       cwd=str(deployment.workspace))  # fmt: skip
    outcome = run_both(["hook", "beforeShellExecution", "--exit-code"], payload, _env(daemon))
    assert outcome.code == 2
    answer = _answer(outcome)
    assert answer["permission"] == "deny"
    assert outcome.lines == [answer["agent_message"]]
    # without --exit-code the same block exits 0
    assert run_both(["hook", "beforeShellExecution"], payload, _env(daemon)).code == 0


def test_tcp_with_and_without_a_valid_token(
    served: tuple[Deployment, DaemonProcess], tmp_path: Path
) -> None:
    deployment, daemon = served
    assert daemon.tcp is not None
    url = f"http://{daemon.tcp[0]}:{daemon.tcp[1]}"
    payload = _payload(deployment, "beforeShellExecution", command="rm -rf /",
                       cwd=str(deployment.workspace))  # fmt: skip
    token_file = tmp_path / "token"
    token_file.write_text(f"  {TOKEN}\n")
    good = run_both(["hook", "beforeShellExecution", "--url", url, "--token-file",
                     str(token_file)], payload)  # fmt: skip
    assert good.code == 0 and _answer(good)["permission"] == "deny" and good.stderr == ""
    url_env = {"CLOUDRUNNER_URL": url, "CLOUDRUNNER_TOKEN_FILE": str(token_file)}
    by_env = run_both(["hook", "beforeShellExecution"], payload, url_env)
    assert by_env == good

    token_file.write_text("wrong-token\n")
    for env in ({}, {"CLOUDRUNNER_TOKEN_FILE": str(token_file)}):
        refused = run_both(["hook", "beforeShellExecution", "--url", url], payload, env)
        assert refused.code == 0 and _answer(refused) == {"permission": "allow"}
        assert refused.lines[0].startswith("cloudrunner: the daemon refused the event: ")
        assert "fail-open" in refused.lines[0]
        # a TCP daemon's run directory is unknown without CLOUDRUNNER_STATE_DIR
        assert "CLOUDRUNNER_STATE_DIR" in refused.lines[1]
    # with the state directory named, the policy there decides; nothing is spooled
    state = tmp_path / "state"
    state.mkdir()
    (state / "fail-policy.json").write_text(
        json.dumps({"version": 1, "daemon": "w", "fail_closed_events": ["beforeShellExecution"]})
    )
    blocked = run_both(["hook", "beforeShellExecution", "--url", url, "--exit-code"], payload,
                       {"CLOUDRUNNER_STATE_DIR": str(state)})  # fmt: skip
    assert blocked.code == 2 and "per " + str(state / "fail-policy.json") in blocked.lines[0]
    assert not (state / "fallback.spool").exists()


def test_a_malformed_payload_is_refused_by_the_daemon_and_answered_by_policy(
    served: tuple[Deployment, DaemonProcess],
) -> None:
    _, daemon = served
    for payload in (b"{oops", b"[1, 2]", None):
        outcome = run_both(["hook", "stop"], payload, _env(daemon))
        assert outcome.code == 0 and _answer(outcome) == {}
        assert outcome.lines[0].startswith("cloudrunner: the daemon refused the event: ")


def test_a_10_mb_payload_is_refused_whole_not_cut(
    served: tuple[Deployment, DaemonProcess],
) -> None:
    deployment, daemon = served
    huge = _payload(deployment, "beforeShellExecution", command="echo " + "a" * (10 * 1024 * 1024))
    outcome = run_both(["hook", "beforeShellExecution", "--fail-closed"], huge, _env(daemon))
    assert outcome.code == 0
    assert _answer(outcome)["permission"] == "deny"
    assert outcome.lines[0].startswith("cloudrunner: the daemon refused the event: ")
    assert "blocking (fail-closed)" in outcome.lines[0]


def test_a_closed_stdin_is_a_usage_error(served: tuple[Deployment, DaemonProcess]) -> None:
    _, daemon = served
    outcome = run_both(["hook", "stop"], None, _env(daemon), stdin="closed")
    assert outcome.code == 64
    assert outcome.lines == [
        "cloudrunner: error: cloudrunner hook reads the event JSON on stdin, and stdin is closed"
    ]
    unreadable = run_both(["hook", "stop"], None, _env(daemon), stdin="write-only")
    assert unreadable.code == 64
    assert unreadable.lines == [
        "cloudrunner: error: cannot read the event JSON on stdin (bad file descriptor)"
    ]


def test_health_through_both_clients(served: tuple[Deployment, DaemonProcess]) -> None:
    _, daemon = served
    outcome = run_both(["health"], None, _env(daemon))
    assert outcome.code == 0 and json.loads(outcome.stdout)["status"] == "ok"


# --------------------------------------------------------------------------- no answer


def test_no_daemon_fails_open_without_a_policy_and_spools_the_event(tmp_path: Path) -> None:
    sock = tmp_path / "cloudrunner.sock"
    payload = b'{"conversation_id": "conv-9", "generation_id": 7}'
    outcome = run_both(["hook", "preToolUse", "--socket", str(sock)], payload)
    assert outcome.code == 0 and _answer(outcome) == {"permission": "allow"}
    problem = f"no daemon answers on unix:{sock} (the socket does not exist)"
    assert outcome.lines == [
        f"cloudrunner: {problem}; letting the event through (fail-open)",
        f"cloudrunner: no fail policy was published at {tmp_path}/fail-policy.json; failing open",
    ]
    lines = (tmp_path / "fallback.spool").read_bytes().splitlines(keepends=True)
    assert len(lines) == 2 and all(line.endswith(b"\n") and len(line) <= 4096 for line in lines)
    records = [json.loads(line) for line in lines]
    assert [r["client"] for r in records] == ["cloudrunner hook", "cloudrunner-hook"]
    for record in records:
        assert set(record) == {
            "version", "time", "event", "outcome", "answer", "problem", "decided_by",
            "policy_daemon", "client", "pid", "conversation_id", "generation_id",
            "payload_sha256",
        }  # fmt: skip
        assert record["version"] == 1 and record["time"].endswith("Z")
        assert (record["event"], record["outcome"], record["problem"]) == (
            "preToolUse", "allowed", problem
        )  # fmt: skip
        assert record["answer"] == {"permission": "allow"}
        assert (record["decided_by"], record["policy_daemon"]) == ("no-policy", None)
        assert (record["conversation_id"], record["generation_id"]) == ("conv-9", None)
        import hashlib

        assert record["payload_sha256"] == hashlib.sha256(payload).hexdigest()
    assert (tmp_path / "fallback.spool").stat().st_mode & 0o777 == 0o600


def test_a_draining_daemon_is_no_answer_and_the_event_is_spooled(tmp_path: Path) -> None:
    sock = tmp_path / "cloudrunner.sock"
    with fake_daemon(sock, http_answer("503 Service Unavailable", DRAINING)):
        outcome = run_both(["hook", "beforeSubmitPrompt", "--socket", str(sock), "--fail-closed",
                            "--exit-code"], b'{"prompt": "hi"}')  # fmt: skip
    assert outcome.code == 2
    answer = _answer(outcome)
    assert answer["continue"] is False
    assert answer["user_message"].startswith(
        "cloudrunner could not run the hooks, so this is blocked (fail-closed): the daemon is "
        "shutting down"
    )
    assert outcome.lines[0].endswith("; blocking (fail-closed)")
    assert outcome.lines[-1] == answer["user_message"]
    spooled = [json.loads(x) for x in (tmp_path / "fallback.spool").read_text().splitlines()]
    assert [(r["outcome"], r["decided_by"]) for r in spooled] == [("blocked", "flag")] * 2


def test_a_dropped_connection_is_no_answer(tmp_path: Path) -> None:
    sock = tmp_path / "cloudrunner.sock"
    with fake_daemon(sock, b""):
        outcome = run_both(["hook", "stop", "--socket", str(sock)], b"{}")
    assert outcome.code == 0 and _answer(outcome) == {}
    assert outcome.lines[0] == (
        f"cloudrunner: the daemon on unix:{sock} closed without an answer; "
        "letting the event through (fail-open)"
    )
    with fake_daemon(sock, b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"permi'):
        cut = run_both(["hook", "stop", "--socket", str(sock)], b"{}")
    assert "dropped the connection (the answer was cut short)" in cut.lines[0]
    with fake_daemon(sock, b"SSH-2.0-OpenSSH_9.2\r\n\r\n"):
        other = run_both(["hook", "stop", "--socket", str(sock)], b"{}")
    assert f"unix:{sock} does not speak HTTP" in other.lines[0]
    assert len((tmp_path / "fallback.spool").read_text().splitlines()) == 6


def test_an_answer_over_the_caps_is_no_answer_in_both(tmp_path: Path) -> None:
    sock = tmp_path / "cloudrunner.sock"
    endless_head = b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * (70 << 10) + b"\r\n\r\n{}"
    with fake_daemon(sock, endless_head):
        head = run_both(["hook", "stop", "--socket", str(sock)], b"{}")
    assert head.code == 0 and _answer(head) == {}
    assert head.lines[0] == (
        f"cloudrunner: the daemon on unix:{sock} sent an answer whose head is over 65536 bytes "
        "(a cloudrunner daemon's is a few hundred); letting the event through (fail-open)"
    )
    huge = (70 << 20) * b" "
    with fake_daemon(sock, http_answer("200 OK", b"{}" + huge)):
        body = run_both(["hook", "preToolUse", "--socket", str(sock), "--fail-closed"], b"{}")
    assert body.code == 0 and _answer(body)["permission"] == "deny"
    assert body.lines[0] == (
        f"cloudrunner: the daemon on unix:{sock} sent an answer over 67108864 bytes "
        "(a cloudrunner daemon's are far smaller); blocking (fail-closed)"
    )
    spooled = [json.loads(x) for x in (tmp_path / "fallback.spool").read_text().splitlines()]
    assert [r["outcome"] for r in spooled] == ["allowed", "allowed", "blocked", "blocked"]


def test_a_daemon_that_cannot_write_its_audit_log_refused_the_event_not_spooled(
    tmp_path: Path,
) -> None:
    sock = tmp_path / "cloudrunner.sock"
    (tmp_path / "fail-policy.json").write_text(
        json.dumps({"version": 1, "daemon": "w", "fail_closed_events": ["preToolUse"]})
    )
    with fake_daemon(sock, http_answer("503 Service Unavailable", AUDIT_UNWRITABLE)):
        outcome = run_both(["hook", "preToolUse", "--socket", str(sock)], b"{}")
    assert outcome.code == 0
    assert _answer(outcome)["permission"] == "deny"
    assert outcome.lines == [
        "cloudrunner: the daemon refused the event: the audit log cannot be written: disk full; "
        f"blocking (fail-closed) (a failClosed hook is configured for preToolUse, per "
        f"{tmp_path}/fail-policy.json)"
    ]
    assert not (tmp_path / "fallback.spool").exists()


def test_timeout_expiry_is_no_answer(tmp_path: Path) -> None:
    sock = tmp_path / "cloudrunner.sock"
    with fake_daemon(sock, hang=True):
        outcome = run_both(["hook", "stop", "--socket", str(sock), "--timeout", "0.5"], b"{}")
    assert outcome.lines[0] == (
        f"cloudrunner: the daemon on unix:{sock} did not answer within 0.5s; "
        "letting the event through (fail-open)"
    )


# --------------------------------------------------------------------------- the fail policy


def _policy(directory: Path, text: str) -> None:
    (directory / "fail-policy.json").write_text(text)


POLICY = json.dumps({
    "version": 1, "daemon": "worker-7", "pid": 1, "written_at": "2026-12-04T18:00:00Z",
    "fail_closed_events": ["beforeShellExecution", "preToolUse"],
    "sources": {"beforeShellExecution": ["project"]}, "future": True,
})  # fmt: skip


@pytest.mark.parametrize(
    ("event", "policy", "flags", "env", "blocked", "decided_by"),
    [
        ("beforeShellExecution", POLICY, [], {}, True, "policy"),
        ("beforeReadFile", POLICY, [], {}, False, "policy"),
        ("stop", '{"version": 1, "fail_closed_events": ["stop"]}', [], {}, False, "policy"),
        ("beforeShellExecution", None, [], {}, False, "no-policy"),
        ("beforeShellExecution", "{not json", [], {}, False, "no-policy"),
        ("beforeShellExecution", '{"version": 2, "fail_closed_events": []}', [], {}, False,
         "no-policy"),
        ("beforeShellExecution", '{"version": 1, "fail_closed_events": [1]}', [], {}, False,
         "no-policy"),
        ("beforeShellExecution", POLICY, ["--fail-open"], {}, False, "flag"),
        ("beforeReadFile", POLICY, ["--fail-closed"], {}, True, "flag"),
        ("beforeShellExecution", POLICY, [], {"CLOUDRUNNER_FAIL_CLOSED": "no"}, False, "env"),
        ("beforeReadFile", None, [], {"CLOUDRUNNER_FAIL_CLOSED": "TRUE"}, True, "env"),
        ("beforeReadFile", POLICY, ["--fail-open"], {"CLOUDRUNNER_FAIL_CLOSED": "1"}, False,
         "flag"),
    ],
    ids=["listed", "not-listed", "cannot-block", "no-file", "corrupt", "version-2", "bad-types",
         "flag-open", "flag-closed", "env-open", "env-closed", "flag-over-env"],
)  # fmt: skip
def test_the_fail_policy_decides_when_no_daemon_answers(
    tmp_path: Path, event: str, policy: str | None, flags: list[str], env: dict[str, str],
    blocked: bool, decided_by: str,
) -> None:  # fmt: skip
    if policy is not None:
        _policy(tmp_path, policy)
    sock = tmp_path / "cloudrunner.sock"
    outcome = run_both(["hook", event, "--exit-code", *flags],
                       b"{}", {"CLOUDRUNNER_SOCKET": str(sock), **env})  # fmt: skip
    assert outcome.code == (2 if blocked else 0)
    assert (_answer(outcome).get("permission") == "deny") is blocked
    mode = "blocking (fail-closed)" if blocked else "letting the event through (fail-open)"
    assert outcome.lines[0].startswith(f"cloudrunner: no daemon answers on unix:{sock}")
    assert mode in outcome.lines[0]
    if decided_by == "policy" and blocked:
        assert outcome.lines[0].endswith(
            f"(a failClosed hook is configured for {event}, per {tmp_path}/fail-policy.json)"
        )
    if decided_by == "no-policy":
        assert (
            outcome.lines[1].endswith("; failing open") and "fail-policy.json" in outcome.lines[1]
        )
    records = [json.loads(x) for x in (tmp_path / "fallback.spool").read_text().splitlines()]
    assert {r["decided_by"] for r in records} == {decided_by}
    if decided_by == "policy" and policy == POLICY:
        assert {r["policy_daemon"] for r in records} == {"worker-7"}


def test_a_full_spool_is_said_and_the_answer_still_given(tmp_path: Path) -> None:
    spool = tmp_path / "fallback.spool"
    spool.write_bytes(b"x" * (1024 * 1024 - 100))
    sock = tmp_path / "cloudrunner.sock"
    outcome = run_both(["hook", "stop", "--socket", str(sock)], b"{}")
    assert outcome.code == 0 and _answer(outcome) == {}
    assert outcome.lines[-1] == (
        f"cloudrunner: the fallback spool {spool} is full (1 MiB); this event is not recorded"
    )
    assert spool.stat().st_size == 1024 * 1024 - 100
    # a spool that cannot be written: one line, the answer still given
    missing = tmp_path / "gone" / "cloudrunner.sock"
    outcome = run_both(["hook", "stop", "--socket", str(missing)], b"{}")
    assert outcome.code == 0 and outcome.lines[-1] == (
        f"cloudrunner: cannot write the fallback spool {missing.parent}/fallback.spool "
        "(no such file or directory); this event is not recorded"
    )


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"CLOUDRUNNER_SOCKET": "{tmp}/" + "a" * 120 + ".sock"},
         "the socket path is longer than 107 bytes"),
        ({"CLOUDRUNNER_SOCKET": "{tmp}/dir"}, "connection refused"),
        ({"CLOUDRUNNER_SOCKET": "{tmp}/file"}, "connection refused"),
        ({"CLOUDRUNNER_SOCKET": "relative.sock"}, "the socket does not exist"),
        ({"CLOUDRUNNER_URL": "http://[::1]:1"}, "connection refused"),
        ({"CLOUDRUNNER_URL": "http://127.0.0.1:1", "CLOUDRUNNER_STATE_DIR": "{tmp}"},
         "connection refused"),
    ],
    ids=["long-path", "a-directory", "a-file", "relative", "ipv6", "tcp-state-dir"],
)  # fmt: skip
def test_endpoints_that_answer_nothing_are_said_alike(
    tmp_path: Path, env: dict[str, str], problem: str
) -> None:
    (tmp_path / "file").write_text("not a socket")
    (tmp_path / "dir").mkdir()
    filled = {k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()}
    outcome = run_both(["hook", "preToolUse"], b"{}", filled, cwd=tmp_path)  # relative paths
    assert outcome.code == 0 and _answer(outcome) == {"permission": "allow"}
    assert outcome.lines[0].startswith("cloudrunner: no daemon answers on ")
    assert f"({problem}); letting the event through (fail-open)" in outcome.lines[0]
    if "CLOUDRUNNER_SOCKET" in filled or "CLOUDRUNNER_STATE_DIR" in filled:
        assert (tmp_path / "fallback.spool").exists()  # the run directory holds the spool


# --------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["hook"], {}, "the following arguments are required: EVENT"),
        (["hook", "stop", "--bogus"], {}, "unrecognized arguments: --bogus"),
        (["hook", "stop", "extra"], {}, "unrecognized arguments: extra"),
        (["hook", "stop", "--exit"], {}, "unrecognized arguments: --exit"),
        (["hook", "stop", "--socket"], {}, "argument --socket: expected one argument"),
        (["hook", "stop", "--fallback", "maybe"], {},
         "argument --fallback: invalid choice: 'maybe' (choose from 'none', 'in-process')"),
        (["hook", "stop", "--timeout", "soon"], {},
         "argument --timeout: 'soon' is not a number of seconds above 0"),
        (["hook", "stop", "--timeout", "0"], {},
         "argument --timeout: '0' is not a number of seconds above 0"),
        (["hook", "stop", "--socket", "/s", "--url", "http://h:1"], {},
         "argument --url: not allowed with argument --socket"),
        (["hook", "stop", "--fail-closed", "--fail-open"], {},
         "argument --fail-open: not allowed with argument --fail-closed"),
        (["hook", "stop"], {"CLOUDRUNNER_FAIL_CLOSED": "maybe"},
         "CLOUDRUNNER_FAIL_CLOSED='maybe' must be 1, true or yes (fail closed) or 0, false or no "
         "(fail open)"),
        (["hook", "stop"], {"CLOUDRUNNER_FALLBACK": "sometimes"},
         "CLOUDRUNNER_FALLBACK='sometimes' must be none or in-process"),
        (["hook", "stop", "--url", "https://h:1"], {},
         "--url 'https://h:1' must be http://HOST:PORT (the daemon's --listen address)"),
        (["hook", "stop", "--url", "http://h:99999"], {}, "--url 'http://h:99999' has a bad port"),
        (["hook", "stop", "--url", "http://u@h:0"], {}, "--url 'http://u@h:0' has a bad port"),
        (["hook", "stop", "--url", "http://h:x", "--token-file", "/nonexistent/token"], {},
         "cannot read the token file /nonexistent/token (no such file or directory)"),
        (["hook", "stop", "--url", "https://h:x"], {},
         "--url 'https://h:x' must be http://HOST:PORT (the daemon's --listen address)"),
        (["hook", "stop", "--url", "http://h:1", "--token-file", "/"], {},
         "cannot read the token file / (is a directory)"),
        (["hook", "stop", "--url", "http://h:1", "--token-file", "/nonexistent/token"], {},
         "cannot read the token file /nonexistent/token (no such file or directory)"),
        (["hook", "a b"], {},
         "EVENT 'a b' is not a hook event name (ASCII letters and digits, like "
         "beforeShellExecution)"),
        (["hook", "stop HTTP/1.1\r\nX-Injected: 1"], {}, None),
        (["hook", "st\udcffop\u200b"], {},
         "EVENT 'st\\udcffop\\u200b' is not a hook event name (ASCII letters and digits, like "
         "beforeShellExecution)"),
    ],
)  # fmt: skip
def test_usage_errors_exit_64_with_one_line(
    args: list[str], env: dict[str, str], message: str | None
) -> None:
    outcome = run_both(args, b"{}", env)
    assert outcome.code == 64 and outcome.stdout == b""
    assert len(outcome.lines) == 1 and outcome.lines[0].startswith("cloudrunner: error: ")
    if message is not None:
        assert outcome.lines[0] == f"cloudrunner: error: {message}"


@pytest.mark.parametrize(
    "token",
    ["clients-token\r\nX-Injected: 1", "two words", "t\u00f6ken-0123456789", "tok\x00en",
     "tok\x7fen", "tok\ten"],
)  # fmt: skip
def test_a_token_a_header_cannot_carry_is_a_usage_error_in_both(tmp_path: Path, token: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{token}\n", encoding="utf-8")
    for args, env in (
        (["hook", "stop", "--url", "http://127.0.0.1:1", "--token-file", str(token_file)], {}),
        (["hook", "stop"],
         {"CLOUDRUNNER_URL": "http://127.0.0.1:1", "CLOUDRUNNER_TOKEN_FILE": str(token_file)}),
    ):  # fmt: skip
        outcome = run_both(args, b"{}", env)
        assert outcome.code == 64 and outcome.stdout == b"", "nothing was sent with it"
        assert outcome.lines == [
            f"cloudrunner: error: the token file {token_file} holds a character a bearer token "
            "cannot carry (a space, a control character or non-ASCII); write the daemon's token "
            "there, visible ASCII characters only"
        ]


# --------------------------------------------------------------------------- any command line

#: words a careless user or a hostile hooks file might put on the command line
WORDS = [
    "hook", "health", "stop", "preToolUse", "beforeShellExecution", "bogus", "--socket",
    "--url", "--token-file", "--exit-code", "--fallback", "none", "in-process", "--fail-closed",
    "--fail-open", "--config", "--timeout", "0.5", "-1", "0", "nan", "--", "-", "-x", "--exit",
    "--socket=", "--exit-code=1", "--timeout=2", "--fallback=x", "--url=http://127.0.0.1:1",
    "http://127.0.0.1:1", "https://h", "'", '"', "a b", "--ready",
]  # fmt: skip


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    command=st.sampled_from(["hook", "health"]),
    words=st.lists(st.sampled_from(WORDS), max_size=6),
    fail=st.sampled_from(["", "1", "x"]),
)
def test_any_command_line_gets_the_same_outcome_from_both(
    command: str, words: list[str], fail: str
) -> None:
    """`hook ...` / `health ...` (other first words are the rest of the Python CLI)."""
    with tempfile.TemporaryDirectory() as directory:
        env = {"CLOUDRUNNER_SOCKET": f"{directory}/cloudrunner.sock",
               "CLOUDRUNNER_FAIL_CLOSED": fail}  # fmt: skip
        run_both([command, *words], b"{}", env, cwd=Path(directory))  # relative --socket


def test_the_compiled_client_without_python_answers_by_policy(tmp_path: Path) -> None:
    """Only `cloudrunner-hook`: on a VM without the Python package, `--fallback in-process`
    has nothing to run; the fail policy answers, the spool records it, stderr says why."""
    alone = tmp_path / "bin" / "cloudrunner-hook"
    alone.parent.mkdir()
    shutil.copy2(CLIENTS["compiled"], alone)
    sock = tmp_path / "cloudrunner.sock"
    proc = subprocess.run(
        [str(alone), "hook", "preToolUse", "--fallback", "in-process", "--fail-closed",
         "--socket", str(sock)],
        input=b"{}", capture_output=True, env={"PATH": str(alone.parent)}, timeout=60,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["permission"] == "deny"
    lines = proc.stderr.decode().splitlines()
    assert lines[0] == (
        f"cloudrunner: no daemon answers on unix:{sock} (the socket does not exist); "
        "running the event in process"
    )
    assert lines[1] == (
        "cloudrunner: --fallback in-process needs the Python cloudrunner command, which is not "
        "installed beside cloudrunner-hook or on PATH; blocking (fail-closed)"
    )
    (record,) = [json.loads(x) for x in (tmp_path / "fallback.spool").read_text().splitlines()]
    assert (record["client"], record["outcome"], record["decided_by"]) == (
        "cloudrunner-hook", "blocked", "flag"
    )  # fmt: skip


def test_a_link_or_fifo_planted_as_the_spool_is_not_written_through(tmp_path: Path) -> None:
    """The spool is opened without following a link and without blocking on a FIFO: the
    link's target is untouched, and both clients say so in the same line."""
    sock = tmp_path / "cloudrunner.sock"
    target = tmp_path / "elsewhere.txt"
    target.write_text("untouched\n")
    spool = tmp_path / "fallback.spool"
    spool.symlink_to(target)
    linked = run_both(["hook", "stop", "--socket", str(sock)], b"{}")
    assert linked.code == 0 and _answer(linked) == {}
    assert linked.lines[-1] == (
        f"cloudrunner: cannot write the fallback spool {spool} (too many levels of symbolic "
        "links); this event is not recorded"
    )
    assert target.read_text() == "untouched\n"
    spool.unlink()
    os.mkfifo(spool)
    fifo = run_both(["hook", "stop", "--socket", str(sock)], b"{}")
    assert fifo.code == 0 and _answer(fifo) == {}
    assert fifo.lines[-1].startswith(f"cloudrunner: cannot write the fallback spool {spool} (")
