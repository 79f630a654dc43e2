"""A hook opens its own stdin, stdout and stderr by path (`/dev/stdin`, `/dev/stdout`,
`/dev/stderr`), as it can on the agent's VM: every common form, in hook and session
isolation, under runc and runsc, with an unprivileged hook uid, through a real `cloudrunner
serve` and both clients (tests/support/two_clients.py) on real containers.

Each form is a guard that denies with a message naming the command it read from its
payload: only a hook that read the payload (and wrote its answer) by path can produce that
message. A guard that cannot open /dev/stdin exits 2 or prints nothing, which reads as a
block of a different message or a pass: either fails the test."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.ci import missing, needs_root
from tests.support.daemon_process import DaemonProcess, daemon_process
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import committed_repo
from tests.support.two_clients import missing_client, run_both

pytestmark = [pytest.mark.docker, needs_root("needs root to own the workspace as another uid")]

_DENY = '{permission: "deny", agent_message: ("%s saw: " + .command)}'
#: form -> the guard's command (each is a shell script: `set -e`, so a failed open ends it)
FORMS: dict[str, str] = {
    "jq": "jq -c '%s' /dev/stdin" % (_DENY % "jq"),
    "cat": "cat /dev/stdin | jq -c '%s'" % (_DENY % "cat"),
    "python": (
        'python3 -c \'import json; d = json.load(open("/dev/stdin")); '
        'print(json.dumps({"permission": "deny", "agent_message": "python saw: " + '
        'd["command"]}))\''
    ),
    "node-path": (
        'node -e \'const d = JSON.parse(require("fs").readFileSync("/dev/stdin", "utf8")); '
        'console.log(JSON.stringify({permission: "deny", agent_message: "node-path saw: " + '
        "d.command}))'"
    ),
    "node-fd0": (
        'node -e \'const d = JSON.parse(require("fs").readFileSync(0, "utf8")); '
        'console.log(JSON.stringify({permission: "deny", agent_message: "node-fd0 saw: " + '
        "d.command}))'"
    ),
    "exec-3": "exec 3</dev/stdin\njq -c '%s' <&3" % (_DENY % "exec-3"),
    "stderr": "echo 'a note on stderr' >/dev/stderr\njq -c '%s'" % (_DENY % "stderr"),
    # the answer to stdout and a copy to stderr, both by path (`tee /dev/stdout` alone
    # would write it twice to the same pipe)
    "tee": "jq -c '%s' | tee /dev/stderr >/dev/stdout" % (_DENY % "tee"),
}
#: hostile: a hook that tries to reach the agent (PID 1 of a session container) or its
#: channel through /proc, and would deny with what it could open
PROBE = """ls /proc/1/fd >&2 || true
for f in /proc/1/fd/0 /proc/1/fd/1 /proc/1/fd/2 /proc/1/fd/3 /proc/1/fd/4 /proc/1/fd/5; do
  if timeout 2 cat "$f" </dev/null >/dev/null || true >"$f"; then
    echo "{\\"permission\\": \\"deny\\", \\"agent_message\\": \\"opened $f\\"}"; exit 0
  fi
done
echo '{"permission": "allow"}'
"""
OWNER = 1234  # the checkout's owner under runsc (gVisor does not apply the host's ACLs)


def _workspace(base: Path, runtime: str) -> Path:
    ws = base / "repo"
    hooks = ws / ".cursor" / "hooks"
    hooks.mkdir(parents=True)
    entries = []
    for form, body in {**FORMS, "probe": PROBE}.items():
        (hooks / f"{form}.sh").write_text(f"#!/bin/sh\nset -e\n{body}\n")
        (hooks / f"{form}.sh").chmod(0o755)
        entries.append({"command": f".cursor/hooks/{form}.sh", "matcher": f"^form-{form} "})
    (ws / ".cursor" / "hooks.json").write_text(
        json.dumps({"version": 1, "hooks": {"beforeShellExecution": entries}})
    )
    committed_repo(ws, "guards")
    if runtime == "runsc":
        for directory, dirs, files in os.walk(ws):
            for name in (directory, *(os.path.join(directory, n) for n in (*dirs, *files))):
                os.lchown(name, OWNER, OWNER)
    return ws


@pytest.fixture(scope="module", params=["runc", "runsc"])
def runtime(request: pytest.FixtureRequest, docker_client: Any) -> str:
    why = missing_client()
    if why:
        pytest.fail(why, pytrace=False)  # a missing client is a failure, never a skip
    if request.param == "runsc" and "runsc" not in (docker_client.info().get("Runtimes") or {}):
        missing("the engine has no runsc runtime; `bash scripts/docker-up` registers it")
    return str(request.param)


@pytest.fixture(params=["hook", "session"])
def isolation(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def served(
    isolation: str, tmp_path: Path, runtime: str, docker_tracker: DockerTracker
) -> Iterator[tuple[Path, DaemonProcess]]:
    tmp_path.chmod(0o755)
    ws = _workspace(tmp_path, runtime)
    state = tmp_path / "state"
    daemon = daemon_process(
        ["--workspace", str(ws), "--state-dir", str(state), "--enterprise-hooks",
         str(tmp_path / "none.json"), "--isolation", isolation, "--runtime", runtime],
        state=state, worker_id=docker_tracker.worker_id,
    )  # fmt: skip
    daemon.start()
    try:
        yield ws, daemon
    finally:
        daemon.stop()


def _event(ws: Path, command: str) -> bytes:
    payload = {
        "hook_event_name": "beforeShellExecution",
        "conversation_id": "c1",
        "generation_id": "g1",
        "cursor_version": "1.7.0",
        "workspace_roots": [str(ws)],
        "command": command,
        "cwd": str(ws),
    }
    return json.dumps(payload).encode()


def _hooks(state: Path) -> list[dict[str, Any]]:
    lines = (state / "audit.log").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "hook"]


def test_every_form_reads_its_payload_and_writes_its_answer_by_path(
    served: tuple[Path, DaemonProcess],
) -> None:
    ws, daemon = served
    env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
    for form in FORMS:
        command = f"form-{form} git push --force"
        outcome = run_both(["hook", "beforeShellExecution"], _event(ws, command), env)
        assert outcome.code == 0, outcome
        answer = json.loads(outcome.stdout)
        assert answer.get("permission") == "deny", (form, answer)
        assert answer.get("agent_message") == f"{form} saw: {command}", (form, answer)
    hooks = _hooks(ws.parent / "state")
    assert len(hooks) == 2 * len(FORMS)
    assert {h["outcome"] for h in hooks} == {"ok"}, [h.get("reason") for h in hooks]
    # the hooks ran as an unprivileged uid
    users = {h["attestation"]["hook_user"] for h in hooks}
    assert len(users) == 1 and int(users.pop().split(":")[0]) > 0


@pytest.mark.parametrize("isolation", ["session"])  # hook isolation has no agent
def test_a_hook_cannot_reach_the_agent_through_proc(served: tuple[Path, DaemonProcess]) -> None:
    ws, daemon = served
    env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
    outcome = run_both(["hook", "beforeShellExecution"], _event(ws, "form-probe ls"), env)
    assert outcome.code == 0, outcome
    assert json.loads(outcome.stdout) == {"permission": "allow"}
    probe = _hooks(ws.parent / "state")[-1]
    assert probe["outcome"] == "ok", probe
    assert "Permission denied" in probe["stderr_excerpt"], probe
