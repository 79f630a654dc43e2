"""The VM path right by default (issue 32): `vm` needs no --enterprise-hooks, since the
daemon's default enterprise file is no longer the agent's, and prints the next command; a
daemon given the agent's file as its hooks refuses to start, `serve` and `vm` alike."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cloudrunner.commands.vm import DEFAULT_AGENT_HOOKS, DEFAULT_ENTERPRISE


def _cloudrunner(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}  # no CLOUDRUNNER_* from the caller
    return subprocess.run([sys.executable, "-m", "cloudrunner", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_the_default_enterprise_file_is_not_the_agents() -> None:
    assert DEFAULT_ENTERPRISE != DEFAULT_AGENT_HOOKS
    assert Path("/etc/cloudrunner/enterprise-hooks.json") == DEFAULT_ENTERPRISE


def test_vm_with_only_a_workspace_writes_both_files_and_says_what_next(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    agent, unit = tmp_path / "agent" / "hooks.json", tmp_path / "cloudrunner.service"
    proc = _cloudrunner("vm", "--workspace", str(ws), "--state-dir", str(tmp_path / "s"),
                        "--agent-hooks", str(agent), "--unit", str(unit), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(agent.read_text())["hooks"]) != []
    assert "ExecStart=" in unit.read_text()
    lines = proc.stdout.splitlines()
    assert lines[-1] == "next: systemctl daemon-reload && systemctl enable --now cloudrunner"
    assert f"install {unit} as /etc/systemd/system/cloudrunner.service" in lines[-2]


def test_serve_refuses_the_agents_file_as_its_hooks_naming_both(tmp_path: Path) -> None:
    agent = tmp_path / "cursor" / "hooks.json"
    agent.parent.mkdir()
    agent.write_text(json.dumps({"version": 1, "hooks": {
        "stop": [{"command": "/usr/bin/cloudrunner-hook hook stop --socket /s"}]}}))  # fmt: skip
    state = tmp_path / "state"
    vm_only = ["--agent-hooks", str(tmp_path / "other.json"), "--workspace", str(tmp_path / "ws")]
    for command in ("serve", "vm"):
        proc = _cloudrunner(command, "--enterprise-hooks", str(agent), "--state-dir", str(state),
                            *(vm_only if command == "vm" else []), cwd=tmp_path)  # fmt: skip
        assert proc.returncode != 0, (command, proc.stdout)
        assert "Traceback" not in proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert str(agent) in line and str(state / "cloudrunner.sock") in line, line
        assert "call itself" in line
    assert not (state / "cloudrunner.sock").exists()
    assert not (tmp_path / "other.json").exists()
