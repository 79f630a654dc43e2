"""Failures the sandbox caused, end to end: real hooks in real containers say why they failed.

A repository whose hooks hit each cause (a program missing from the image, a script without
its executable bit, a workspace path the hook uid cannot write, no network) is adopted by
`cloudrunner run`; the answers and the audit records must name the cause and the fix and keep
the stderr line that showed it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import committed_repo

pytestmark = pytest.mark.docker

HOOKS = {
    "version": 1,
    "hooks": {
        # a PowerShell guard (10 of the corpus's files use one): pwsh is not in the image
        "preToolUse": [
            {"command": "pwsh -NoProfile -File .cursor/hooks/guard.ps1", "failClosed": True}
        ],
        # committed without its executable bit, run by path
        "beforeShellExecution": [{"command": ".cursor/hooks/noexec.sh"}],
        # writes its state into a directory of the checkout the hook uid cannot write, and
        # swallows the error (exit 0), as real hooks do
        "afterFileEdit": [{"command": "python3 .cursor/hooks/remember.py"}],
        # reaches for the network: the project sandbox has none
        "stop": [{"command": "curl -sS -m 5 https://api.example.com/notify"}],
    },
}

REMEMBER = """\
import os, sys
try:
    with open(os.path.join(os.environ["CURSOR_PROJECT_DIR"], "locked", "state.json"), "w") as f:
        f.write("{}")
except OSError as exc:
    print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
print("{}")
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)
    root = tmp_path / "repo"
    hooks = root / ".cursor" / "hooks"
    hooks.mkdir(parents=True)
    (root / ".cursor" / "hooks.json").write_text(json.dumps(HOOKS))
    (hooks / "guard.ps1").write_text("exit 0\n")
    (hooks / "noexec.sh").write_text("#!/bin/sh\necho '{}'\n")
    (hooks / "noexec.sh").chmod(0o644)
    (hooks / "remember.py").write_text(REMEMBER)
    (root / "locked").mkdir()
    (root / "locked" / ".keep").write_text("")
    committed_repo(root, "hooks")
    (root / "locked").chmod(0o555)  # nobody but root may create files in it
    return root


def _run(
    repo: Path, state: Path, tracker: DockerTracker, image: str, isolation: str,
    payload: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    env["CLOUDRUNNER_WORKER_ID"] = tracker.worker_id
    event = {
        "conversation_id": "c1", "generation_id": "g1", "cursor_version": "1.7.0",
        "workspace_roots": [str(repo)], **payload,
    }  # fmt: skip
    proc = subprocess.run(
        [
            sys.executable, "-m", "cloudrunner", "run", "--workspace", str(repo),
            "--state-dir", str(state), "--image", image, "--isolation", isolation,
            "--enterprise-hooks", str(state.parent / "no-enterprise.json"),
        ],
        input=json.dumps(event).encode(), capture_output=True, env=env, timeout=300,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    answer = json.loads(proc.stdout)
    assert isinstance(answer, dict)
    return answer


def _hook_record(state: Path, event: str) -> dict[str, Any]:
    records = [json.loads(line) for line in (state / "audit.log").read_text().splitlines()]
    hooks = [r for r in records if r.get("kind") == "hook" and r.get("event") == event]
    assert len(hooks) == 1, hooks
    record: dict[str, Any] = hooks[0]
    return record


@pytest.mark.parametrize("isolation", ["hook", "session"])
def test_sandbox_caused_failures_name_their_cause_fix_and_stderr_line(
    repo: Path, tmp_path: Path, docker_tracker: DockerTracker, runtime_image: str, isolation: str
) -> None:
    state = tmp_path / "state"

    def run(payload: dict[str, Any]) -> dict[str, Any]:
        return _run(repo, state, docker_tracker, runtime_image, isolation, payload)

    # exit 127, failClosed: the block tells the agent which program and what to do
    denied = run({"hook_event_name": "preToolUse", "tool_name": "Shell", "tool_input": {}})
    assert denied["permission"] == "deny"
    assert f"`pwsh` is not in image {runtime_image}" in denied["agent_message"]
    assert ".cursor/environment.json or the runtime image" in denied["agent_message"]
    record = _hook_record(state, "preToolUse")
    assert record["exit_code"] == 127
    assert record["sandbox_cause"]["kind"] == "missing_program"
    assert record["sandbox_cause"]["subject"] == "pwsh"
    assert "pwsh: not found" in record["sandbox_cause"]["line"]

    # exit 126: fail-open, and the record says to set the executable bit
    allowed = run({"hook_event_name": "beforeShellExecution", "command": "ls", "cwd": str(repo)})
    assert allowed == {"permission": "allow"}
    record = _hook_record(state, "beforeShellExecution")
    assert record["exit_code"] == 126
    assert record["outcome"] == "error"
    assert "chmod +x" in record["reason"]
    assert record["sandbox_cause"]["line"].endswith("noexec.sh: Permission denied")

    # EACCES swallowed by the hook: still ok, but the record says the workspace is not writable
    target = str(repo / "src.py")
    assert run({"hook_event_name": "afterFileEdit", "file_path": target, "edits": []}) == {}
    record = _hook_record(state, "afterFileEdit")
    assert record["outcome"] == "ok"
    assert "the workspace is not writable by the hook uid" in record["reason"]
    cause = record["sandbox_cause"]
    assert cause["kind"] == "workspace_not_writable"
    assert cause["line"].startswith("PermissionError: [Errno 13] Permission denied")
    assert cause["subject"] == str(repo / "locked" / "state.json")

    # no network: the lookup fails inside the sandbox and the record says why
    assert run({"hook_event_name": "stop", "status": "completed", "loop_count": 0}) == {}
    record = _hook_record(state, "stop")
    assert record["outcome"] == "error"
    assert record["sandbox_cause"]["kind"] == "no_network"
    assert "no network for project hooks" in record["reason"]
    assert "Could not resolve host: api.example.com" in record["sandbox_cause"]["line"]
