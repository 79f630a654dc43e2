"""Claude Code hooks end to end: a repository with only `.claude/settings.json` (and one with
both Claude files) behind `cloudrunner serve` and the client, hooks in real containers."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Deployment, bare_origin
from tests.support.daemon_process import DaemonProcess, daemon_process, run_client
from tests.support.docker_tracking import DockerTracker
from tests.support.two_clients import missing_client, run_both

GUARD = """\
import json, sys
event = json.load(sys.stdin)
command = (event.get("tool_input") or {}).get("command", "")
named = (event["hook_event_name"], event["tool_name"])
if named == ("PreToolUse", "Bash") and "rm -rf" in command:
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "no recursive delete (session " + event["session_id"] + ")"}}))
"""

FORMAT = """\
import json, os, sys
event = json.load(sys.stdin)
path = event["tool_input"]["file_path"]
root = os.environ["CLAUDE_PROJECT_DIR"]
full = os.path.join(root, path)
with open(full) as fh:
    text = fh.read()
with open(full, "w") as fh:
    fh.write("\\n".join(line.rstrip() for line in text.splitlines()) + "\\n")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                         "additionalContext": "formatted " + path}}))
"""

STOP = """\
import json, sys
event = json.load(sys.stdin)
if not event["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "run the tests before stopping"}))
"""

SETTINGS = {
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [
                {"type": "command", "timeout": 20,
                 "command": "python3 \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/guard.py"}]},
        ],
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [
                {"type": "command", "command": "python3", "args": [".claude/hooks/format.py"]}]},
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "python3 .claude/hooks/stop.py"}]}],
    },
}  # fmt: skip


def _rewrite(command: str) -> dict[str, Any]:
    script = (
        "import json; print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse', "
        f"'permissionDecision': 'allow', 'updatedInput': {{'command': {command!r}}}}}}}))"
    )
    return {"type": "command", "command": "python3", "args": ["-c", script]}


def _deployment(
    base: Path, worker_id: str, files: dict[str, str], *, executable: bool = False
) -> Deployment:
    src = base / "src"
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if executable and name.endswith(".sh"):
            path.chmod(0o755)
    origin = bare_origin(base, src, "claude hooks")
    enterprise = base / "enterprise"
    enterprise.mkdir()
    for path in (base, enterprise):
        path.chmod(0o755)
    return Deployment(base, origin, enterprise, base / "workspace", base / "state", worker_id)


def _files(**extra: str) -> dict[str, str]:
    return {
        ".claude/settings.json": json.dumps(SETTINGS, indent=2),
        ".claude/hooks/guard.py": GUARD,
        ".claude/hooks/format.py": FORMAT,
        ".claude/hooks/stop.py": STOP,
        "src/app.py": "x = 1   \ny = 2\t\n",
        **extra,
    }


class Served:
    def __init__(self, deployment: Deployment, daemon: DaemonProcess) -> None:
        self.deployment = deployment
        self.daemon = daemon

    def answer(self, name: str, **fields: Any) -> dict[str, Any]:
        payload = self.deployment.event(name, **fields)
        proc = run_client(
            ["hook", name], payload, env={"CLOUDRUNNER_SOCKET": str(self.daemon.socket_path)}
        )
        assert proc.returncode == 0, proc.stderr.decode()
        value = json.loads(proc.stdout)
        assert isinstance(value, dict)
        return value


def _serve(
    tmp_path: Path, tracker: DockerTracker, files: dict[str, str], *flags: str
) -> Iterator[Served]:
    tmp_path.chmod(0o755)
    deployment = _deployment(tmp_path, tracker.worker_id, files)
    daemon = daemon_process(
        [*deployment.flags(), *flags], state=deployment.state, worker_id=deployment.worker_id
    ).start()
    try:
        yield Served(deployment, daemon)
    finally:
        daemon.stop()


@pytest.fixture
def claude_on(tmp_path: Path, docker_tracker: DockerTracker) -> Iterator[Served]:
    yield from _serve(tmp_path, docker_tracker, _files(), "--claude-code")


@pytest.fixture
def claude_off(tmp_path: Path, docker_tracker: DockerTracker) -> Iterator[Served]:
    yield from _serve(tmp_path, docker_tracker, _files())


def test_claude_hooks_answer_as_they_intend(claude_on: Served) -> None:
    served = claude_on
    ws = served.deployment.workspace
    denied = served.answer(
        "preToolUse", tool_name="Shell", tool_input={"command": "rm -rf build"}, cwd=str(ws)
    )
    assert denied["permission"] == "deny"
    assert denied["agent_message"] == "no recursive delete (session conv-1)"
    allowed = served.answer("preToolUse", tool_name="Shell", tool_input={"command": "ls"})
    assert allowed == {"permission": "allow"}

    edited = served.answer(
        "postToolUse", tool_name="Write",
        tool_input={"file_path": "src/app.py", "old_string": "x", "new_string": "x"},
    )  # fmt: skip
    assert edited == {"additional_context": "formatted src/app.py"}
    assert (ws / "src" / "app.py").read_text() == "x = 1\ny = 2\n"

    assert served.answer("stop", status="completed", loop_count=0) == {
        "followup_message": "run the tests before stopping"
    }
    assert served.answer("stop", status="completed", loop_count=1) == {}

    served.daemon.stop()
    hooks = [r for r in served.deployment.records() if r["kind"] == "hook"]
    assert hooks, "no hook records"
    for record in hooks:
        assert record["source_file"].endswith(".claude/settings.json")
        assert "Claude Code" in record["reason"]


def test_nothing_loads_with_the_setting_off(claude_off: Served) -> None:
    served = claude_off
    denied = served.answer("preToolUse", tool_name="Shell", tool_input={"command": "rm -rf /"})
    assert denied == {"permission": "allow"}
    assert served.answer("stop", status="completed", loop_count=0) == {}
    served.daemon.stop()
    records = served.deployment.records()
    assert not [r for r in records if r["kind"] == "hook"]
    skipped = [r for r in records if r["kind"] == "skipped"]
    assert any("sources.claude_code is off" in r["reason"] for r in skipped)


def test_both_files_merge_local_first(tmp_path: Path, docker_tracker: DockerTracker) -> None:
    local = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [_rewrite("ls -la")]}]}}
    project = dict(SETTINGS)
    project["hooks"] = {"PreToolUse": [{"matcher": "*", "hooks": [_rewrite("ls -1")]}]}
    files = _files(**{
        ".claude/settings.local.json": json.dumps(local),
        ".claude/settings.json": json.dumps(project),
    })  # fmt: skip
    for served in _serve(tmp_path, docker_tracker, files, "--claude-code"):
        answer = served.answer("preToolUse", tool_name="Shell", tool_input={"command": "ls"})
        assert answer == {"permission": "allow", "updated_input": {"command": "ls -la"}}
        served.daemon.stop()
        hooks = [r for r in served.deployment.records() if r["kind"] == "hook"]
        files_in_order = [Path(r["source_file"]).name for r in hooks]
        assert files_in_order == ["settings.local.json", "settings.json"]


def test_replay_covers_claude_hooks(tmp_path: Path, docker_tracker: DockerTracker) -> None:
    tmp_path.chmod(0o755)
    deployment = _deployment(tmp_path, docker_tracker.worker_id, _files())
    stream = tmp_path / "session.jsonl"
    guarded = deployment.event(
        "preToolUse", tool_name="Shell", tool_input={"command": "rm -rf build"}
    )
    stop = deployment.event("stop", status="completed", loop_count=0)
    for payload in (guarded, stop):
        proc = deployment.run(payload, "--claude-code", "--record", str(stream))
        assert proc.returncode == 0, proc.stderr.decode()
    entries = [json.loads(line) for line in stream.read_text().splitlines()]
    assert entries[0]["expected"]["permission"] == "deny"
    assert entries[0]["hooks"][0]["source_file"].endswith(".claude/settings.json")

    def replay(state: str, *flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cloudrunner", "replay", str(stream),
             "--repo", deployment.origin.as_uri(), "--state-dir", str(tmp_path / state),
             "--enterprise-hooks", str(deployment.enterprise / "hooks.json"), *flags],
            capture_output=True, text=True, env=deployment.base_env(), timeout=600, check=False,
        )  # fmt: skip

    green = replay("replay-on", "--claude-code")
    assert green.returncode == 0, green.stdout + green.stderr
    assert "replay: 2 events, 2 match, 0 diverged" in green.stdout
    off = replay("replay-off")
    assert off.returncode == 1, off.stdout + off.stderr
    assert "replay: 2 events, 0 match, 2 diverged" in off.stdout


# Claude hooks that read their payload by path (/dev/stdin), as many public ones do: a
# top-level `decision: "ask"`, a prompt hook's plain stdout, and a Stop hook that reads the
# last assistant message Claude Code gives it.
ASK_BY_PATH = """#!/bin/sh
set -e
if jq -e '.tool_input.command | test("push --force")' /dev/stdin >/dev/null; then
  echo '{"decision": "ask", "reason": "confirm the force-push"}'
fi
"""
PROMPT_BY_PATH = """#!/bin/sh
set -e
jq -e '.prompt' /dev/stdin >/dev/null
echo "Staging is frozen this week."
"""
STOP_BY_PATH = """#!/bin/sh
set -e
said=$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync("/dev/stdin",
  "utf8")).last_assistant_message || "")')
case "$said" in
  *"All tests pass"*) ;;
  *) jq -cn --arg said "$said" '{decision: "block", reason: ("you said: " + $said)}' ;;
esac
"""
BY_PATH_SETTINGS = {
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": ".claude/hooks/ask.sh"}]}],
        "UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": ".claude/hooks/prompt.sh"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": ".claude/hooks/stop.sh"}]}],
    },
}  # fmt: skip


def test_claude_hooks_reading_by_path_ask_add_context_and_see_the_last_message(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    why = missing_client()
    if why:
        pytest.fail(why, pytrace=False)
    files = {
        ".claude/settings.json": json.dumps(BY_PATH_SETTINGS),
        ".claude/hooks/ask.sh": ASK_BY_PATH,
        ".claude/hooks/prompt.sh": PROMPT_BY_PATH,
        ".claude/hooks/stop.sh": STOP_BY_PATH,
    }
    tmp_path.chmod(0o755)
    deployment = _deployment(tmp_path, docker_tracker.worker_id, files, executable=True)
    deployment.isolation = "session"
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir(mode=0o755)
    done = transcripts / "done.jsonl"
    done.write_text(
        json.dumps({"role": "user", "message": {"content": "fix it"}}) + "\n"
        + json.dumps({"role": "assistant", "message": {"content": [
            {"type": "text", "text": "All tests pass now."}]}}) + "\n"
    )  # fmt: skip
    busy = transcripts / "busy.jsonl"
    busy.write_text(json.dumps({"role": "assistant", "text": "Still on it."}) + "\n")
    for path in (done, busy):
        path.chmod(0o644)
    daemon = daemon_process(
        [*deployment.flags(), "--claude-code"], state=deployment.state,
        worker_id=deployment.worker_id,
    ).start()  # fmt: skip
    env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}

    def answer(name: str, **fields: Any) -> dict[str, Any]:
        payload = json.dumps(deployment.event(name, **fields)).encode()
        outcome = run_both(["hook", name], payload, env)
        assert outcome.code == 0, outcome
        value = json.loads(outcome.stdout)
        assert isinstance(value, dict)
        return value

    try:
        push = {"command": "git push --force origin main"}
        assert answer("preToolUse", tool_name="Shell", tool_input=push) == {
            "permission": "ask", "user_message": "confirm the force-push"
        }  # fmt: skip
        assert answer("preToolUse", tool_name="Shell", tool_input={"command": "ls"}) == {
            "permission": "allow"
        }
        assert answer("beforeSubmitPrompt", prompt="deploy") == {"continue": True}
        assert answer("stop", status="completed", loop_count=0, transcript_path=str(done)) == {}
        assert answer("stop", status="completed", loop_count=0, transcript_path=str(busy)) == {
            "followup_message": "you said: Still on it."
        }
    finally:
        daemon.stop()
    hooks = [r for r in deployment.records() if r["kind"] == "hook"]
    assert {h["outcome"] for h in hooks} == {"ok"}, [h["reason"] for h in hooks]
    assert not [h for h in hooks if h.get("sandbox_cause")]
    prompt = [h for h in hooks if h["event"] == "beforeSubmitPrompt"]
    assert prompt and all("to the model's context" in h["reason"] for h in prompt)
    assert all("no context for the model" in h["reason"] for h in prompt)
