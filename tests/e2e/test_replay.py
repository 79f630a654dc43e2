"""Recording a session of the demo repository and replaying it with `cloudrunner replay`,
through real containers: green at the recorded commit, a divergence report once a hook
changes in a new commit, `--update`, a hand-written TOML stream, a repository that does
not match the stream."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Deployment, make_deployment
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import committed_repo, git

pytestmark = pytest.mark.docker


@pytest.fixture
def deployed(tmp_path: Path, docker_tracker: DockerTracker) -> Deployment:
    tmp_path.chmod(0o755)
    deployment = make_deployment(tmp_path, docker_tracker.worker_id)
    deployment.isolation = "session"
    return deployment


def cli(deployment: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudrunner", *args],
        capture_output=True,
        text=True,
        env=deployment.base_env(),
        timeout=600,
        check=False,
    )


def replay(
    deployment: Deployment, stream: Path, state: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return cli(
        deployment,
        "replay", str(stream), "--repo", deployment.origin.as_uri(),
        "--enterprise-hooks", str(deployment.enterprise / "hooks.json"),
        "--isolation", "session", "--state-dir", str(deployment.root / state), *args,
    )  # fmt: skip


def record_session(deployment: Deployment, stream: Path) -> list[dict[str, object]]:
    ws = deployment.workspace
    events = [
        deployment.event("beforeSubmitPrompt", prompt="Add a test"),
        deployment.event("beforeShellExecution", command="ls -la", cwd=str(ws)),
        deployment.event("beforeShellExecution", command="rm -rf /", cwd=str(ws)),
        deployment.event(
            "afterFileEdit",
            file_path=str(ws / "src" / "app.py"),
            edits=[{"old_string": "", "new_string": "def greet(name):   \n"}],
        ),
        *(deployment.event("stop", status="completed", loop_count=n) for n in range(3)),
    ]
    return [deployment.answer(event, "--record", str(stream)) for event in events]


def test_a_recorded_session_replays_green_then_a_changed_hook_diverges(
    deployed: Deployment,
) -> None:
    stream = deployed.root / "session.jsonl"
    answers = record_session(deployed, stream)
    assert answers[2]["permission"] == "deny"
    entries = [json.loads(line) for line in stream.read_text().splitlines()]
    head = git(deployed.origin, "rev-parse", "main")
    assert len(entries) == 7
    assert {entry["commit"] for entry in entries} == {head}
    assert [entry["expected"] for entry in entries] == answers
    guard = entries[2]["hooks"][0]
    assert guard["command"] == ".cursor/hooks/guard.sh" and guard["source"] == "project"
    assert guard["image_digest"].startswith("sha256:") and len(guard["source_hash"]) == 64
    assert entries[0]["payload"]["prompt"] == "Add a test" and entries[0]["altered"] == []

    green = replay(deployed, stream, "replay-1")
    assert green.returncode == 0, green.stdout + green.stderr
    assert f"at {head[:12]}" in green.stdout
    assert "replay: 7 events, 7 match, 0 diverged" in green.stdout

    # A new commit lets `rm -rf /` through: replaying main shows exactly that divergence.
    src = deployed.root / "src"
    script = src / ".cursor" / "hooks" / "guard.sh"
    script.write_text(script.read_text().replace('*"rm -rf /"*|', ""))
    git(src, "commit", "-q", "-am", "guard: allow rm -rf /")
    git(src, "push", "-q", str(deployed.origin), "main")
    changed = replay(deployed, stream, "replay-2", "--ref", "main")
    out = changed.stdout
    assert changed.returncode == 1, out + changed.stderr
    assert "DIVERGED  #3 beforeShellExecution" in out
    assert "hook      project `.cursor/hooks/guard.sh`: merge_use" in out
    assert 'expected  {"agent_message": "The command `rm -rf /` is not allowed' in out
    assert 'got       {"permission": "allow"}' in out
    assert "replay: 7 events, 6 match, 1 diverged" in out
    assert f"replayed at {git(deployed.origin, 'rev-parse', 'main')[:12]}" in out

    # --update takes the new answers (and the new commit); the stream is green at main.
    updated = replay(deployed, stream, "replay-3", "--ref", "main", "--update")
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert "updated 1 expected answer(s)" in updated.stdout
    again = replay(deployed, stream, "replay-4", "--format", "json")
    report = json.loads(again.stdout)
    assert again.returncode == 0 and report["ok"] and report["diverged"] == 0
    assert report["commit"] == git(deployed.origin, "rev-parse", "main")


def test_a_hand_written_toml_stream_replays_and_reports_what_it_expected(
    deployed: Deployment,
) -> None:
    tests = deployed.root / "hook-tests.toml"
    tests.write_text(
        """conversation_id = "hook-tests"

[[events]]
name = "a destructive command is denied"
event = "beforeShellExecution"
payload = { command = "rm -rf /", cwd = "{workspace}" }
expected = { permission = "deny" }

[[events]]
name = "a harmless command is allowed"
event = "beforeShellExecution"
payload = { command = "ls", cwd = "{workspace}" }
expected = { permission = "deny" }
"""
    )
    shipped = replay(deployed, deployed.root / "src" / ".cursor" / "hook-tests.toml", "shipped")
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    assert "replay: 3 events, 3 match, 0 diverged" in shipped.stdout
    result = replay(deployed, tests, "replay-toml")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "ok        #1 beforeShellExecution: a destructive command is denied" in out
    assert "DIVERGED  #2 beforeShellExecution: a harmless command is allowed" in out
    assert "note      no hook decided this answer (0 hook(s) ran for it)" in out
    assert "replay: 2 events, 1 match, 1 diverged" in out


def test_a_repository_without_the_streams_commit_is_a_clear_error(
    deployed: Deployment,
) -> None:
    stream = deployed.root / "one.jsonl"
    deployed.answer(
        deployed.event("beforeShellExecution", command="ls", cwd=str(deployed.workspace)),
        "--record",
        str(stream),
    )
    other = deployed.root / "other"
    other.mkdir()
    (other / "README.md").write_text("another repository\n")
    committed_repo(other, "unrelated")
    result = cli(
        deployed, "replay", str(stream), "--repo", other.as_uri(),
        "--state-dir", str(deployed.root / "replay-other"),
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"cloudrunner: error: the repository {other.as_uri()} does")
    assert "does not match the stream" in result.stderr
    assert "Traceback" not in result.stderr
