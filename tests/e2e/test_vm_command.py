"""`cloudrunner vm` tested by running what it writes: the unit's ExecStart starts a real
daemon (after `systemd-analyze verify` passes the unit), every entry of the agent's hooks
file is run as the agent runs it, with one payload of each of the 14 cloud events, and
`--check` finds each fault put into the file."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.audit import verify_log
from cloudrunner.protocol.events import CLOUD_EVENTS
from tests.e2e.conftest import Deployment, make_deployment
from tests.support.cloud_payloads import payload
from tests.support.daemon_process import DaemonProcess
from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker


def _vm(deployment: Deployment, *extra: str) -> subprocess.CompletedProcess[str]:
    root = deployment.root
    return subprocess.run(
        [sys.executable, "-m", "cloudrunner", "vm",
         "--workspace", str(deployment.workspace),
         "--repo", deployment.origin.as_uri(), "--ref", "main",
         "--state-dir", str(deployment.state),
         "--enterprise-hooks", str(deployment.enterprise / "hooks.json"),
         "--isolation", "session",
         "--agent-hooks", str(root / "agent" / "hooks.json"),
         "--unit", str(root / "cloudrunner.service"), *extra],
        capture_output=True, text=True, env=deployment.base_env(), timeout=120, check=False,
    )  # fmt: skip


def _unit(path: Path) -> dict[str, list[str]]:
    """The unit's keys (a key may repeat) in its sections, as systemd reads the simple
    lines this unit has."""
    keys: dict[str, list[str]] = {}
    section = ""
    for line in path.read_text().splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif "=" in line:
            key, _, value = line.partition("=")
            keys.setdefault(f"{section}.{key}", []).append(value)
    return keys


def _unit_argv(value: str) -> list[str]:
    return [w.replace("$$", "$").replace("%%", "%") for w in shlex.split(value)]


def _verify_unit(path: Path) -> None:
    """systemd-analyze verify where Debian's systemd is installed, else the structure."""
    keys = _unit(path)
    assert keys["Service.Type"] == ["simple"]
    assert keys["Install.WantedBy"] == ["multi-user.target"]
    assert "docker.service" in keys["Unit.After"][0]
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return
    proc = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    # a missing docker.service on a machine without Docker's unit is no fault of the file
    problems = [x for x in proc.stderr.splitlines() if x.strip() and "docker.service" not in x]
    assert proc.returncode == 0 and problems == [], proc.stderr
    broken = path.with_name("broken.service")
    broken.write_text(path.read_text().replace("ExecStart=/", "ExecStart=relative/"))
    proc = subprocess.run([analyze, "verify", str(broken)], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert proc.returncode != 0 or "ExecStart" in proc.stderr  # the verifier is live


def _run_entry(
    entry: dict[str, Any], event_payload: dict[str, Any], env: dict[str, str], says: str = ""
) -> Any:
    """One entry as the agent runs it: its command through a shell, the payload on stdin,
    killed at its timeout; stderr is `says` or, by default, empty (the daemon answered)."""
    proc = subprocess.run(
        ["sh", "-c", entry["command"]], input=json.dumps(event_payload), capture_output=True,
        text=True, env=env, timeout=entry["timeout"], check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    if says:
        assert says in proc.stderr
    else:
        assert proc.stderr == "", proc.stderr  # the daemon answered: no fallback was taken
    return json.loads(proc.stdout)


def test_the_written_configuration_routes_every_cloud_event_to_a_real_daemon(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    tmp_path.chmod(0o755)
    deployment = make_deployment(tmp_path, docker_tracker.worker_id)
    agent_hooks, unit = tmp_path / "agent" / "hooks.json", tmp_path / "cloudrunner.service"

    written = _vm(deployment)
    assert written.returncode == 0, written.stderr
    compiled = (Path(sys.executable).parent / "cloudrunner-hook").exists()
    assert ("the compiled client" if compiled else "the Python client") in written.stdout
    assert "project hooks are not counted" in written.stderr  # nothing cloned yet
    config = json.loads(agent_hooks.read_text())
    assert sorted(config["hooks"]) == sorted(CLOUD_EVENTS)
    assert config["hooks"]["beforeSubmitPrompt"][0]["failClosed"] is True  # the enterprise's
    _verify_unit(unit)

    keys = _unit(unit)
    argv = _unit_argv(keys["Service.ExecStart"][0])
    assert argv[1:2] == ["serve"] and "--workspace" in argv and "--isolation" in argv
    env = {**deployment.base_env(), **dict(e.split("=", 1) for e in keys["Service.Environment"])}
    daemon = DaemonProcess(argv, env, deployment.state / "cloudrunner.sock")
    daemon.start()
    try:
        agent_env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
        for event in CLOUD_EVENTS:
            (entry,) = config["hooks"][event]
            _run_entry(entry, payload(event, str(deployment.workspace)), agent_env)
        (guard,) = config["hooks"]["beforeShellExecution"]
        denied = _run_entry(guard, payload("beforeShellExecution", str(deployment.workspace),
                                           command="rm -rf /"), agent_env)  # fmt: skip
        assert denied["permission"] == "deny"
        other = _run_entry(
            guard,
            payload("beforeShellExecution", str(tmp_path)),
            agent_env,
            says="the daemon refused the event: the event names the workspace",
        )
        # refused, nothing ran: the client's fail policy answers, and the policy the
        # daemon published blocks it (the project's guard for the event is failClosed)
        assert other["permission"] == "deny" and "fail-closed" in other["agent_message"]
    finally:
        assert daemon.stop() == 0
    assert any(f"workspace {deployment.workspace} (cloned from" in x for x in daemon.stderr_lines)
    records = deployment.records()
    received = {r["event"] for r in records if r["kind"] == "received"}
    assert received == set(CLOUD_EVENTS)
    assert {r["workspace"] for r in records if r["kind"] == "received"} == {
        str(deployment.workspace)
    }
    (refused,) = [r for r in records if r["kind"] == "refused"]
    assert str(tmp_path) in refused["reason"] and str(deployment.workspace) in refused["reason"]
    assert verify_log(deployment.audit_log).ok

    # now cloned: the project's failClosed guard is counted, and the file lacks it
    checked = _vm(deployment, "--check")
    assert checked.returncode == 1
    assert "beforeShellExecution: not failClosed" in checked.stdout
    assert _vm(deployment).returncode == 0
    clean = _vm(deployment, "--check")
    assert clean.returncode == 0, clean.stdout

    # each fault the check is for
    config = json.loads(agent_hooks.read_text())
    del config["hooks"]["preCompact"]
    config["hooks"]["afterFileEdit"][0]["timeout"] = 5  # the formatter may run for 20 s
    config["hooks"]["stop"][0]["command"] = config["hooks"]["stop"][0]["command"].replace(
        str(Path(sys.executable).parent), "/nonexistent/bin", 1
    )
    agent_hooks.write_text(json.dumps(config))
    faulty = _vm(deployment, "--check")
    assert faulty.returncode == 1
    lines = faulty.stdout.splitlines()
    assert f"{agent_hooks}: preCompact: not routed to the cloudrunner client" in lines
    assert any("afterFileEdit: timeout 5s is shorter" in x and "20s" in x for x in lines)
    assert any("stop: the client /nonexistent/bin/" in x for x in lines)


def test_vm_refuses_a_setup_that_would_call_itself_and_a_relative_workspace(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"  # the operator's files outside the checkout
    ws.mkdir()
    base = [
        sys.executable,
        "-m",
        "cloudrunner",
        "vm",
        "--state-dir",
        str(tmp_path / "s"),
        "--agent-hooks",
        str(tmp_path / "hooks.json"),
        "--unit",
        str(tmp_path / "u"),
    ]
    loop = subprocess.run(
        [*base, "--workspace", str(ws), "--enterprise-hooks", str(tmp_path / "hooks.json")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert loop.returncode != 0 and "call itself" in loop.stderr
    assert "Traceback" not in loop.stderr and not (tmp_path / "hooks.json").exists()
    missing = subprocess.run([*base, "--check", "--workspace", str(ws),
                              "--enterprise-hooks", str(tmp_path / "e.json")],
                             capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    for junk in (b"\xff\xfe", b"{not json", b"[]"):
        (tmp_path / "hooks.json").write_bytes(junk)
        bad = subprocess.run([*base, "--check", "--workspace", str(ws),
                              "--enterprise-hooks", str(tmp_path / "e.json")],
                             capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert bad.returncode != 0 and "Traceback" not in bad.stderr + bad.stdout
        said = (bad.stderr + bad.stdout).strip().splitlines()
        assert any(str(tmp_path / "hooks.json") in line for line in said), said
    own = {"version": 1, "hooks": {"stop": [{"command": "/usr/local/bin/notify.sh"}]}}
    (tmp_path / "hooks.json").write_text(json.dumps(own))
    kept = subprocess.run([*base, "--workspace", str(ws), "--enterprise-hooks",
                           str(tmp_path / "e.json")],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert (
        kept.returncode != 0 and "notify.sh" in kept.stderr and "--enterprise-hooks" in kept.stderr
    )
    assert json.loads((tmp_path / "hooks.json").read_text()) == own  # not dropped
    relative = subprocess.run([*base, "--workspace", "ws"], capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
    assert relative.returncode != 0 and "absolute" in relative.stderr
    assert "Traceback" not in relative.stderr
