"""The fail policy and the fallback spool end to end: a real daemon with real containers
over a real repository, the daemon stopped, the client answering by the policy it
published, and the next daemon taking the spool into the audit log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon_process import DaemonProcess, daemon_process, run_client
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import GUARD, guarded_repo


def _payload(workspace: Path, event: str, **fields: Any) -> dict[str, Any]:
    return {
        "conversation_id": "conv-fp",
        "generation_id": f"gen-{event}",
        "hook_event_name": event,
        "workspace_roots": [str(workspace)],
        **fields,
    }


#: the compiled per-event client, beside this interpreter once `scripts/setup` built it
COMPILED = Path(sys.executable).with_name("cloudrunner-hook")


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}


def _cloudrunner(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudrunner", *args], capture_output=True, text=True,
        env=_clean_env(), timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def scene(tmp_path: Path, docker_tracker: DockerTracker) -> tuple[Path, Path, list[str], str]:
    tmp_path.chmod(0o755)
    workspace = guarded_repo(tmp_path / "repo")
    state = tmp_path / "state"
    flags = [
        "--workspace", str(workspace), "--state-dir", str(state),
        "--audit-log", str(state / "audit.log"), "--isolation", "session",
        "--enterprise-hooks", str(tmp_path / "no-enterprise" / "hooks.json"),
    ]  # fmt: skip
    return workspace, state, flags, docker_tracker.worker_id


def test_a_stopped_daemon_leaves_a_policy_the_client_follows_and_the_next_one_records_it(
    scene: tuple[Path, Path, list[str], str],
) -> None:
    workspace, state, flags, worker_id = scene
    daemon: DaemonProcess = daemon_process(flags, state=state, worker_id=worker_id).start()
    env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
    shell = _payload(workspace, "beforeShellExecution", command="ls", cwd=str(workspace))
    try:
        policy = json.loads((state / "fail-policy.json").read_text())
        assert policy["version"] == 1
        assert policy["fail_closed_events"] == ["beforeShellExecution"]
        assert policy["sources"] == {"beforeShellExecution": ["project"]}
        assert policy["daemon"] == worker_id
        assert daemon.proc is not None and policy["pid"] == daemon.proc.pid
        # the daemon up: the hook runs in its container and allows
        up = run_client(["hook", "beforeShellExecution"], shell, env=env)
        assert up.returncode == 0, up.stderr.decode()
        assert json.loads(up.stdout) == {"permission": "allow"}
        # a reload that changes the set publishes it again, with the next event
        hooks_file = workspace / ".cursor" / "hooks.json"
        hooks = json.loads(hooks_file.read_text())
        hooks["hooks"]["preToolUse"] = [{"command": GUARD, "failClosed": True}]
        hooks_file.write_text(json.dumps(hooks))
        stop = run_client(
            ["hook", "stop"], _payload(workspace, "stop", status="completed"), env=env
        )
        assert stop.returncode == 0, stop.stderr.decode()
        policy = json.loads((state / "fail-policy.json").read_text())
        assert policy["fail_closed_events"] == ["beforeShellExecution", "preToolUse"]
    finally:
        assert daemon.stop() == 0
    assert (state / "fail-policy.json").exists()  # it outlives the daemon

    blocked = run_client(["hook", "beforeShellExecution"], shell, env=env)
    assert blocked.returncode == 0, blocked.stderr.decode()
    block_answer = json.loads(blocked.stdout)
    assert block_answer["permission"] == "deny"
    assert "fail-closed" in block_answer["agent_message"]
    assert "blocking (fail-closed)" in blocked.stderr.decode()
    assert "a failClosed hook is configured for beforeShellExecution" in blocked.stderr.decode()
    through = run_client(["hook", "stop"], _payload(workspace, "stop", status="completed"), env=env)
    assert through.returncode == 0, through.stderr.decode()
    through_answer = json.loads(through.stdout)
    assert "letting the event through (fail-open)" in through.stderr.decode()

    expected = [
        ("beforeShellExecution", "blocked", block_answer),
        ("stop", "allowed", through_answer),
    ]
    if COMPILED.exists():  # the compiled client, where it is built: the same answer, spooled
        compiled = subprocess.run(
            [str(COMPILED), "hook", "beforeShellExecution"], input=json.dumps(shell).encode(),
            capture_output=True, env={**_clean_env(), **env}, timeout=60, check=False,
        )  # fmt: skip
        assert compiled.returncode == 0, compiled.stderr.decode()
        assert json.loads(compiled.stdout) == block_answer
        expected.append(("beforeShellExecution", "blocked", block_answer))

    spooled = [json.loads(x) for x in (state / "fallback.spool").read_text().splitlines()]
    assert [(s["event"], s["outcome"], s["answer"]) for s in spooled] == expected
    assert {s["decided_by"] for s in spooled} == {"policy"}

    again = daemon_process(flags, state=state, worker_id=worker_id).start()
    try:
        taken = f"{len(expected)} event(s) answered without a daemon"
        assert any(taken in x for x in again.stderr_lines)
        assert not (state / "fallback.spool").exists()
        assert not (state / "fallback.spool.ingesting").exists()
    finally:
        assert again.stop() == 0

    records = [json.loads(x) for x in (state / "audit.log").read_text().splitlines()]
    fallback = [r for r in records if r["kind"] == "fallback"]
    assert [(r["event"], r["outcome"], r["answer"]) for r in fallback] == expected
    assert [r["client"] for r in fallback] == ["cloudrunner hook", "cloudrunner hook"] + [
        "cloudrunner-hook"
    ] * (len(expected) - 2)
    assert all("invalid" not in r for r in fallback)
    assert fallback[0]["policy_daemon"] == worker_id
    assert fallback[0]["conversation_id"] == "conv-fp"

    verified = _cloudrunner("audit", "verify", str(state / "audit.log"))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    listed = _cloudrunner(
        "audit", "query", "--kind", "fallback", "--format", "json", str(state / "audit.log")
    )
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(x)["seq"] for x in listed.stdout.splitlines()] == [
        r["seq"] for r in fallback
    ]
    table = _cloudrunner("audit", "query", "--kind", "fallback", str(state / "audit.log"))
    rows = table.stdout.splitlines()[1:]
    assert len(rows) == len(expected) and "deny" in rows[0] and "no daemon answers" in rows[0]


def test_a_hostile_spool_and_an_unwritable_policy_do_not_stop_the_daemon(
    scene: tuple[Path, Path, list[str], str], tmp_path: Path
) -> None:
    workspace, state, flags, worker_id = scene
    state.mkdir(mode=0o700)
    # the policy file's place taken by a directory: the daemon cannot publish it
    (state / "fail-policy.json").mkdir()
    target = tmp_path / "elsewhere.jsonl"
    target.write_text('{"version": 1, "problem": "must not be read"}\n')
    (state / "fallback.spool").symlink_to(target)
    (state / "fallback.spool.ingesting").write_bytes(
        b"garbage\n" + b"{" * 9000 + b"\n" + b"\x00\xff\n"
    )
    daemon = daemon_process(flags, state=state, worker_id=worker_id).start()
    try:
        warnings = [x for x in daemon.stderr_lines if "fail policy could not be published" in x]
        assert len(warnings) == 1 and str(state / "fail-policy.json") in warnings[0]
        env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
        shell = _payload(workspace, "beforeShellExecution", command="ls", cwd=str(workspace))
        up = run_client(["hook", "beforeShellExecution"], shell, env=env)
        assert up.returncode == 0 and json.loads(up.stdout) == {"permission": "allow"}
    finally:
        assert daemon.stop() == 0
    assert target.read_text().startswith('{"version": 1')
    assert not os.path.lexists(state / "fallback.spool")
    records = [json.loads(x) for x in (state / "audit.log").read_text().splitlines()]
    reasons = [r["invalid"] for r in records if r["kind"] == "fallback"]
    assert reasons[0].startswith("the line is not JSON")
    assert reasons[1].startswith("the line is 9000 bytes, over the 4096-byte bound")
    assert reasons[2].startswith("the line is not UTF-8")
    assert reasons[3] == "the spool is a symbolic link; it was not followed"
    assert "must not be read" not in (state / "audit.log").read_text()
    verified = _cloudrunner("audit", "verify", str(state / "audit.log"))
    assert verified.returncode == 0, verified.stdout + verified.stderr

    # a symlink planted where the policy goes: replaced by the file, never written through
    (state / "fail-policy.json").rmdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (state / "fail-policy.json").symlink_to(victim)
    daemon = daemon_process(flags, state=state, worker_id=worker_id).start()
    try:
        assert not (state / "fail-policy.json").is_symlink()
        policy = json.loads((state / "fail-policy.json").read_text())
        assert policy["fail_closed_events"] == ["beforeShellExecution"]
    finally:
        assert daemon.stop() == 0
    assert victim.read_text() == "keep\n"


def test_a_configured_workspace_unusable_at_start_is_said_then_refused_until_fixed(
    scene: tuple[Path, Path, list[str], str], tmp_path: Path
) -> None:
    _, state, flags, worker_id = scene
    plain = tmp_path / "not-a-checkout"  # a real directory git does not know
    plain.mkdir()
    flags = [plain.as_posix() if f.endswith("/repo") else f for f in flags]
    daemon = daemon_process(flags, state=state, worker_id=worker_id).start()
    try:
        said = [x for x in daemon.stderr_lines if "worker.workspace_unusable_at_start" in x]
        assert len(said) == 1 and str(plain) in said[0] and "is not a git checkout" in said[0]
        shell = _payload(plain, "beforeShellExecution", command="ls", cwd=str(plain))
        refused = daemon.event("beforeShellExecution", shell)
        assert refused.status == 422, refused.body
        assert json.loads(refused.body)["error"]["code"] == "workspace-unavailable"
        guarded_repo(plain)  # the operator fixes the checkout while the daemon runs
        fixed = daemon.event("beforeShellExecution", shell)
        assert fixed.status == 200 and json.loads(fixed.body) == {"permission": "allow"}
    finally:
        assert daemon.stop() == 0
    records = [json.loads(x) for x in (state / "audit.log").read_text().splitlines()]
    kinds = [r["kind"] for r in records]
    assert kinds[0] == "refused" and "is not a git checkout" in records[0]["reason"]
    assert kinds[-2:] == ["hook", "decision"]
