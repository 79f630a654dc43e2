"""The end-to-end demo: a repository with project hooks plus an enterprise hook, through real
containers, as a cloud agent VM runs it: a `cloudrunner serve` daemon with warm session
sandboxes, and one `cloudrunner hook EVENT` client process per agent event.

Run it with `bash scripts/demo` (which sets up the engine, images and .venv first).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CLOUDRUNNER = str(Path(sys.executable).with_name("cloudrunner"))
CONVERSATION = "demo-conversation-1"


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=demo", "-c", "user.email=demo@example.invalid", *args],
        cwd=cwd,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def make_origin(base: Path) -> Path:
    """A real git repository holding examples/demo-repo, served as a bare repo over file://."""
    src = base / "src-repo"
    shutil.copytree(HERE / "demo-repo", src)
    git("init", "-q", "-b", "main", cwd=src)
    git("add", "-A", cwd=src)
    git("commit", "-q", "-m", "demo repository", cwd=src)
    origin = base / "origin.git"
    git("clone", "-q", "--bare", str(src), str(origin), cwd=base)
    return origin


def event(name: str, workspace: Path, **fields: Any) -> dict[str, Any]:
    return {
        "conversation_id": CONVERSATION,
        "generation_id": f"gen-{name}",
        "model": "demo-model",
        "hook_event_name": name,
        "cursor_version": "1.7.0",
        "workspace_roots": [str(workspace)],
        "user_email": "dev@example.invalid",
        "transcript_path": None,
        **fields,
    }


def main() -> int:
    # Under the checkout, not /tmp: the workspace is bind-mounted into the hook containers at
    # its host path, and /tmp inside them is their own tmpfs.
    (HERE.parent / ".demo").mkdir(exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="run-", dir=HERE.parent / ".demo"))
    os.chmod(base, 0o755)
    try:
        return run_demo(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_demo(base: Path) -> int:
    origin = make_origin(base)
    enterprise = base / "enterprise"
    shutil.copytree(HERE / "enterprise", enterprise)
    workspace = base / "workspace"
    state = base / "state"
    audit_log = state / "audit.log"
    flags = [
        "--repo", f"file://{origin}", "--ref", "main", "--workspace", str(workspace),
        "--enterprise-hooks", str(enterprise / "hooks.json"),
        "--state-dir", str(state), "--audit-log", str(audit_log),
    ]  # fmt: skip
    steps: list[tuple[str, dict[str, Any]]] = [
        ("a harmless prompt", event("beforeSubmitPrompt", workspace, prompt="Add a test")),
        (
            "a prompt carrying an AWS key (enterprise hook)",
            event("beforeSubmitPrompt", workspace, prompt="use AKIAABCDEFGHIJKLMNOP"),
        ),
        (
            "a harmless shell command",
            event("beforeShellExecution", workspace, command="ls -la", cwd=str(workspace)),
        ),
        (
            "a destructive shell command (project guard)",
            event("beforeShellExecution", workspace, command="rm -rf /", cwd=str(workspace)),
        ),
        (
            "an edit leaving trailing whitespace (project formatter)",
            event(
                "afterFileEdit",
                workspace,
                file_path=str(workspace / "src" / "app.py"),
                edits=[{"old_string": "", "new_string": "def greet(name):   \n"}],
            ),
        ),
    ]
    for n in (1, 2, 3):
        stop = event("stop", workspace, status="completed", loop_count=n - 1)
        steps.append((f"stop #{n} with an open TODO (loop_limit 2)", stop))
    print(f"demo: repository {origin} -> workspace {workspace}\n")
    # A cloud agent may start read-only: hold the gate closed for the first event, as an
    # operator would until the workspace is writable, then let the probe decide again.
    subprocess.run([CLOUDRUNNER, "gate", "close", "--state-dir", str(state)], check=True)
    early = event("beforeShellExecution", workspace, command="rm -rf /", cwd=str(workspace))
    steps.insert(0, ("while the gate is closed: nothing loads or runs", early))
    daemon = start_daemon([*flags, "--isolation", "session"], state)
    client_env = {**os.environ, "CLOUDRUNNER_SOCKET": str(state / "cloudrunner.sock")}
    try:
        for n, (title, payload) in enumerate(steps):
            if n == 1:
                subprocess.run([CLOUDRUNNER, "gate", "auto", "--state-dir", str(state)],
                               check=True)  # fmt: skip
            started = time.monotonic()
            proc = subprocess.run(
                [CLOUDRUNNER, "hook", payload["hook_event_name"]],
                input=json.dumps(payload).encode(),
                capture_output=True,
                env=client_env,
                check=False,
            )
            took = (time.monotonic() - started) * 1000
            answer = proc.stdout.decode().strip()
            print(f"- {payload['hook_event_name']}: {title} ({took:.0f} ms)\n    answer: {answer}")
            if proc.returncode != 0 or proc.stderr.strip():
                print(f"    failed (exit {proc.returncode}): {proc.stderr.decode().strip()}")
                return 1
            if payload["hook_event_name"] == "afterFileEdit":
                text = (workspace / "src" / "app.py").read_text()
                print(f"    src/app.py after the formatter: {text!r}")
        print("\ndemo: a non-cloud event is refused with the reason (and let through):")
        refused = subprocess.run(
            [CLOUDRUNNER, "hook", "sessionStart"],
            input=json.dumps(event("sessionStart", workspace, session_id="s1")).encode(),
            capture_output=True,
            env=client_env,
            check=False,
        )
        print(f"    answer {refused.stdout.decode().strip()}: {refused.stderr.decode().strip()}")
    finally:
        stopped = stop_daemon(daemon)
    print(f"\ndemo: daemon stopped (exit {stopped}), its warm sandboxes closed")
    summarise(audit_log)
    verify = subprocess.run([CLOUDRUNNER, "audit", "verify", str(audit_log)], check=False)
    refused_ok = "not available in the cloud profile" in refused.stderr.decode()
    return 0 if verify.returncode == 0 and refused_ok and stopped == 0 else 1


def start_daemon(flags: list[str], state: Path) -> subprocess.Popen[bytes]:
    """`cloudrunner serve` in the background; returns once it listens."""
    daemon = subprocess.Popen(
        [CLOUDRUNNER, "serve", *flags], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert daemon.stderr is not None
    line = daemon.stderr.readline().decode().strip()
    if "serving on" not in line:
        daemon.kill()
        rest = daemon.stderr.read().decode()
        raise SystemExit(f"demo: the daemon did not start: {line}\n{rest}")
    print(f"demo: {line.removeprefix('cloudrunner: ')}\n")
    return daemon


def stop_daemon(daemon: subprocess.Popen[bytes]) -> int:
    daemon.send_signal(signal.SIGTERM)
    try:
        return daemon.wait(60)
    except subprocess.TimeoutExpired:
        daemon.kill()
        return daemon.wait()


def summarise(audit_log: Path) -> None:
    records = [json.loads(line) for line in audit_log.read_text().splitlines() if line.strip()]
    kinds = Counter(str(r.get("kind")) for r in records)
    outcomes = Counter(str(r.get("outcome")) for r in records if r.get("kind") == "hook")
    print(f"\ndemo: audit log {audit_log}: {len(records)} records")
    print("    by kind:    " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    print("    hook runs:  " + ", ".join(f"{k} {n}" for k, n in sorted(outcomes.items())))
    for record in records:
        if record.get("kind") in ("skipped", "gated"):
            print(f"    {record['kind']}: {record.get('reason')}")


if __name__ == "__main__":
    raise SystemExit(main())
