"""What a hook sees, in real containers on real repositories: the owner's access to the
workspace whoever owns it, git (staged files, status, diff, rev-parse, a commit), a HOME
per source and workspace that persists across events, the transcript, a repository
without commits."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cloudrunner import acl
from cloudrunner.sandbox.limits import FALLBACK_HOOK_UID
from cloudrunner.settings import Settings, load_settings
from cloudrunner.worker import PayloadRefused, Worker
from tests.support.audit_records import read_records
from tests.support.ci import missing, needs_root
from tests.support.daemon_process import daemon_process, run_client
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import bare_repo, git, init_repo
from tests.support.mounts import mount

pytestmark = pytest.mark.docker

# The project hook reports what it sees into .hook-view/ of the workspace (git-ignored).
VIEW = """#!/bin/sh
out="$CURSOR_PROJECT_DIR/.hook-view"
mkdir -p "$out" || exit 3
id -u > "$out/uid"
printf '%s\\n' "$HOME" > "$out/home"
n=$(cat "$HOME/count" 2>/dev/null || echo 0)
echo $((n + 1)) > "$HOME/count"
cp "$HOME/count" "$out/count"
cd "$CURSOR_PROJECT_DIR"
git rev-parse --show-toplevel > "$out/toplevel" 2> "$out/git-err"
git diff --cached --name-only > "$out/staged" 2>> "$out/git-err"
git status --porcelain > "$out/status" 2>> "$out/git-err"
git diff --name-only > "$out/diff" 2>> "$out/git-err"
if [ -n "$CURSOR_TRANSCRIPT_PATH" ] && [ -r "$CURSOR_TRANSCRIPT_PATH" ]; then
  cp "$CURSOR_TRANSCRIPT_PATH" "$out/transcript"
fi
echo '{}'
"""
COMMIT = """#!/bin/sh
cd "$CURSOR_PROJECT_DIR" && git add tracked.txt && git commit -q -m "committed by a hook" >&2
echo '{}'
"""
ENTERPRISE = {
    "version": 1,
    "hooks": {
        "afterFileEdit": [
            {
                "command": 'mkdir -p "$CURSOR_PROJECT_DIR/.hook-view" && '
                'printf "%s\\n" "$HOME" > "$CURSOR_PROJECT_DIR/.hook-view/ent-home"'
            }
        ]
    },
}


@dataclass
class Setup:
    workspace: Path
    state: Path
    enterprise: Path
    worker_id: str

    def settings(self, isolation: str, **extra: Any) -> Settings:
        overrides = {
            "state_dir": self.state,
            "worker_id": self.worker_id,
            "sources.enterprise_hooks": self.enterprise / "hooks.json",
            "workspace.path": self.workspace,
            "sandbox.isolation": isolation,
            **extra,
        }
        return load_settings(environ={}, overrides=overrides)

    def event(self, name: str, **fields: Any) -> bytes:
        payload = {
            "conversation_id": "c1",
            "generation_id": "g1",
            "hook_event_name": name,
            "cursor_version": "1.7.0",
            "workspace_roots": [str(self.workspace)],
            "transcript_path": None,
            **fields,
        }
        return json.dumps(payload).encode()

    def view(self, name: str) -> str:
        return (self.workspace / ".hook-view" / name).read_text()


def _host_home(state: Path, source: str) -> Path:
    """Where the worker keeps a source's HOME (the hooks see it at /home/hook)."""
    decisions = [
        r for r in read_records(state / "audit.log") if r["kind"] == "decision" and r.get("homes")
    ]
    return Path(decisions[-1]["homes"][source]["path"])


def _setup(tmp_path: Path, worker_id: str, *, commit: bool = True) -> Setup:
    ws = tmp_path / "repo"
    hooks = ws / ".cursor" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "view.sh").write_text(VIEW)
    (hooks / "commit.sh").write_text(COMMIT)
    for script in hooks.iterdir():
        script.chmod(0o755)
    (ws / ".cursor" / "hooks.json").write_text(
        json.dumps(
            {
                "version": 1,
                "hooks": {
                    "afterFileEdit": [{"command": ".cursor/hooks/view.sh"}],
                    "stop": [{"command": ".cursor/hooks/commit.sh"}],
                },
            }
        )
    )
    (ws / "tracked.txt").write_text("one\n")
    init_repo(ws)
    (ws / ".git" / "info" / "exclude").write_text(".hook-view/\n")
    git(ws, "add", "-A")
    if commit:
        git(ws, "commit", "-q", "-m", "first")
        (ws / "tracked.txt").write_text("one\ntwo\n")  # an unstaged change
        (ws / "staged.env").write_text("SECRET=1\n")
        git(ws, "add", "staged.env")  # a staged file
    enterprise = tmp_path / "enterprise"
    enterprise.mkdir()
    (enterprise / "hooks.json").write_text(json.dumps(ENTERPRISE))
    enterprise.chmod(0o755)
    (enterprise / "hooks.json").chmod(0o644)
    return Setup(ws, tmp_path / "state", enterprise, worker_id)


def _edit(setup: Setup, **fields: Any) -> bytes:
    return setup.event(
        "afterFileEdit", file_path=str(setup.workspace / "tracked.txt"), edits=[], **fields
    )


@needs_root("needs root to own the workspace as root")
@pytest.mark.parametrize("isolation", ["hook", "session"])
def test_a_root_owned_workspace_is_the_hooks_to_write_and_git_works(
    tmp_path: Path, docker_tracker: DockerTracker, isolation: str
) -> None:
    setup = _setup(tmp_path, docker_tracker.worker_id)
    transcript = tmp_path / "transcripts" / "c1.jsonl"
    transcript.parent.mkdir()
    transcript.write_text('{"role": "user", "text": "hi"}\n')
    transcript.chmod(0o644)
    assert setup.workspace.stat().st_uid == 0
    with Worker(setup.settings(isolation)) as worker:
        reply = worker.handle(_edit(setup, transcript_path=str(transcript)))
        assert reply.answer == {}
        worker.handle(_edit(setup, transcript_path=str(transcript)))
    records = read_records(setup.state / "audit.log")
    hooks = [r for r in records if r["kind"] == "hook"]
    assert [h["outcome"] for h in hooks] == ["ok"] * 4, hooks
    # hooks ran as the unprivileged uid, and could write the root-owned checkout
    assert setup.view("uid").strip() == str(FALLBACK_HOOK_UID)
    assert setup.workspace.stat().st_uid == 0
    entries = acl.decode(os.getxattr(setup.workspace, acl.ACCESS))
    assert acl.perm_of(entries, acl.USER, FALLBACK_HOOK_UID) == 7
    # git: no "dubious ownership"; staged, status, diff and the top level as on a VM
    assert setup.view("git-err") == ""
    assert setup.view("toplevel").strip() == str(setup.workspace)
    assert setup.view("staged").split() == ["staged.env"]
    assert sorted(setup.view("status").splitlines()) == [" M tracked.txt", "A  staged.env"]
    assert setup.view("diff").split() == ["tracked.txt"]
    # HOME: writable, kept across events, one per source, under the state directory on the
    # worker and at a neutral path in the sandbox
    assert setup.view("home").strip() == setup.view("ent-home").strip() == "/home/hook"
    home = _host_home(setup.state, "project")
    assert setup.view("count").strip() == "2"
    assert home.is_relative_to(setup.state / "homes")
    ent_home = _host_home(setup.state, "enterprise")
    assert ent_home != home and ent_home.parent == home.parent
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert home.stat().st_uid == FALLBACK_HOOK_UID
    # the transcript, read-only at its own path
    assert setup.view("transcript") == transcript.read_text()
    decision = [r for r in records if r["kind"] == "decision"][-1]
    assert decision["transcript"]["visible_to_hooks"] is True
    assert decision["workspace_access"]["mechanism"] == "acl"
    assert decision["homes"]["project"]["path"] == str(home)
    assert any(
        m["target"] == str(transcript) and m["mode"] == "ro"
        for m in hooks[-1]["attestation"]["mounts"]
    )


@needs_root("needs root to chown the workspace")
def test_a_hook_commits_in_a_checkout_of_another_uid(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    setup = _setup(tmp_path, docker_tracker.worker_id)
    owner = 1234
    for directory, dirs, files in os.walk(setup.workspace):
        for name in (directory, *(os.path.join(directory, n) for n in (*dirs, *files))):
            os.lchown(name, owner, owner)
    with Worker(setup.settings("session")) as worker:
        assert worker.handle(setup.event("stop", status="completed", loop_count=0)).answer == {}
        worker.handle(_edit(setup))
    hooks = [r for r in read_records(setup.state / "audit.log") if r["kind"] == "hook"]
    assert [h["outcome"] for h in hooks] == ["ok", "ok", "ok"], hooks
    # hooks ran as the owner: nothing was granted, git needed no exception
    assert setup.view("uid").strip() == str(owner)
    assert os.listxattr(setup.workspace) == [] or acl.ACCESS not in os.listxattr(setup.workspace)
    log = git(setup.workspace, "-c", "safe.directory=*", "log", "--format=%an <%ae>|%s", "-1")
    assert log == "cloudrunner hook <hook@cloudrunner.invalid>|committed by a hook"
    assert git(setup.workspace, "-c", "safe.directory=*", "status", "--porcelain") == ""


@needs_root("needs root to own the workspace as root")
def test_a_repository_without_commits_runs_and_a_hook_makes_the_first(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    setup = _setup(tmp_path, docker_tracker.worker_id, commit=False)
    with Worker(setup.settings("hook")) as worker:
        worker.handle(_edit(setup))
        worker.handle(setup.event("stop", status="completed", loop_count=0))
        worker.handle(_edit(setup))
    records = read_records(setup.state / "audit.log")
    decisions = [r for r in records if r["kind"] == "decision"]
    assert decisions[0]["commit"] is None
    assert [r["outcome"] for r in records if r["kind"] == "hook"] == ["ok"] * 5
    first = git(setup.workspace, "rev-parse", "HEAD")
    # the hook's commit is the repository's first; the next event's records name it
    assert decisions[-1]["commit"] == first
    assert setup.view("git-err") == ""


@needs_root("needs root to own the workspace as root")
def test_a_symlinked_transcript_is_not_mounted_and_the_record_says_so(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    setup = _setup(tmp_path, docker_tracker.worker_id)
    secret = tmp_path / "secret"
    secret.write_text("do not show\n")
    link = tmp_path / "transcript.jsonl"
    link.symlink_to(secret)
    with Worker(setup.settings("hook")) as worker:
        worker.handle(_edit(setup, transcript_path=str(link)))
    records = read_records(setup.state / "audit.log")
    decision = [r for r in records if r["kind"] == "decision"][-1]
    assert decision["transcript"]["visible_to_hooks"] is False
    assert "symbolic link" in decision["transcript"]["reason"]
    assert not (setup.workspace / ".hook-view" / "transcript").exists()
    hook = [r for r in records if r["kind"] == "hook"][-1]
    assert all(m["target"] != str(link) for m in hook["attestation"]["mounts"])


@needs_root("needs root to own the workspace as root")
def test_a_home_over_its_limit_stops_that_sources_hooks_with_the_fix_named(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    setup = _setup(tmp_path, docker_tracker.worker_id)
    settings = setup.settings("hook", **{"home.max_bytes": 64 * 1024, "home.measure_interval_s": 0})
    with Worker(settings) as worker:
        worker.handle(_edit(setup))
        home = _host_home(setup.state, "project")
        (home / "big").write_bytes(b"x" * 200 * 1024)
        worker.handle(_edit(setup))
    hooks = [r for r in read_records(setup.state / "audit.log") if r["kind"] == "hook"]
    project = [h for h in hooks if h["source"] == "project"]
    assert project[-1]["outcome"] == "sandbox_error"
    assert str(home) in project[-1]["reason"] and "home.max_bytes" in project[-1]["reason"]
    # the other source has its own home and still runs
    assert [h["outcome"] for h in hooks if h["source"] == "enterprise"] == ["ok", "ok"]
    # a long-lived worker measures at most every home.measure_interval_s (default 10 s)
    with Worker(setup.settings("hook", **{"home.max_bytes": 64 * 1024})) as worker:
        (home / "big").unlink()
        worker.handle(_edit(setup))
        (home / "big").write_bytes(b"x" * 200 * 1024)
        worker.handle(_edit(setup))  # within the interval: the earlier size stands
    last = [h for h in read_records(setup.state / "audit.log") if h["kind"] == "hook"][-1]
    assert (last["source"], last["outcome"]) == ("project", "ok")


@needs_root("needs root to own the workspace as root")
def test_a_home_removed_between_events_is_made_again_within_the_interval(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    """A long-lived worker skips preparing a home it prepared a moment ago, but not when
    the directory is gone (or another took its name)."""
    setup = _setup(tmp_path, docker_tracker.worker_id)
    with Worker(setup.settings("hook")) as worker:
        worker.handle(_edit(setup))
        home = _host_home(setup.state, "project")
        assert (home / ".gitconfig").is_file()
        shutil.rmtree(home)
        worker.handle(_edit(setup))
    assert (home / ".gitconfig").is_file()
    assert home.stat().st_uid != 0
    project = [
        r
        for r in read_records(setup.state / "audit.log")
        if r["kind"] == "hook" and r["source"] == "project"
    ]
    assert [h["outcome"] for h in project] == ["ok", "ok"]


@needs_root("needs root to mount a file system")
def test_a_workspace_on_a_file_system_without_acls_is_refused_with_the_fix(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    target = tmp_path / "noacl"
    target.mkdir()
    # ramfs keeps no extended attributes, so no POSIX ACL can be set there
    mount("-t", "ramfs", "-o", "mode=0755", "ramfs", str(target))
    try:
        setup = _setup(target, docker_tracker.worker_id)
        setup.state = tmp_path / "noacl-state"
        with Worker(setup.settings("hook")) as worker, pytest.raises(PayloadRefused) as refused:
            worker.handle(_edit(setup))
    finally:
        subprocess.run(["umount", str(target)], check=False)
    assert refused.value.code == "workspace-unavailable"
    assert "does not support POSIX ACLs" in refused.value.message
    assert "chown -R 10001:10001" in refused.value.message
    refusal = [
        r for r in read_records(tmp_path / "noacl-state" / "audit.log") if r["kind"] == "refused"
    ]
    assert refusal and "POSIX ACLs" in refusal[-1]["reason"]


@needs_root("needs root to own the workspace as root")
def test_under_gvisor_an_adopted_root_checkout_fails_loudly_with_the_fixes(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    if "runsc" not in (docker_tracker.client.info().get("Runtimes") or {}):
        missing("the engine has no runsc runtime; `bash scripts/docker-up` registers it")
    setup = _setup(tmp_path, docker_tracker.worker_id)
    with Worker(setup.settings("hook", **{"sandbox.runtime": "runsc"})) as worker:
        worker.handle(_edit(setup))
    hooks = [r for r in read_records(setup.state / "audit.log") if r["kind"] == "hook"]
    assert [h["outcome"] for h in hooks] == ["sandbox_error", "sandbox_error"]
    reason = hooks[-1]["reason"]
    assert "gVisor (runtime runsc) does not apply the host's POSIX ACLs" in reason
    assert f"chown -R 10001:10001 {setup.workspace}" in reason


@needs_root("needs root to chown the workspace")
def test_hooks_of_a_configured_user_commit_in_a_checkout_of_another(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    setup = _setup(tmp_path, docker_tracker.worker_id)
    owner, hook = 1234, 2345
    for directory, dirs, files in os.walk(setup.workspace):
        for name in (directory, *(os.path.join(directory, n) for n in (*dirs, *files))):
            os.lchown(name, owner, owner)
    settings = setup.settings("session", **{"sandbox.user": hook, "sandbox.group": hook})
    with Worker(settings) as worker:
        worker.handle(_edit(setup))
        worker.handle(setup.event("stop", status="completed", loop_count=0))
    records = read_records(setup.state / "audit.log")
    assert [r["outcome"] for r in records if r["kind"] == "hook"] == ["ok"] * 3
    assert setup.view("uid").strip() == str(hook)
    assert setup.view("git-err") == ""
    assert setup.view("staged").split() == ["staged.env"]
    access = next(r for r in records if r["kind"] == "decision")["workspace_access"]
    assert (access["mechanism"], access["owner_uid"], access["hook_uids"]) == ("acl", owner, [hook])
    log = git(setup.workspace, "-c", "safe.directory=*", "log", "--format=%s", "-1")
    assert log == "committed by a hook"
    # what the hooks created (git's new objects, the index) stays the owner's to use
    index = setup.workspace / ".git" / "index"
    assert index.stat().st_uid == hook
    default = acl.decode(os.getxattr(setup.workspace / ".git", acl.DEFAULT))
    assert acl.perm_of(default, acl.USER, owner) == 7


GUARD = """#!/bin/sh
# a failClosed secret guard: it denies committing a staged .env, and needs git to say so
staged=$(git diff --cached --name-only) || exit 1
case "$staged" in
  *.env*) echo '{"permission": "deny", "user_message": "a staged .env would be committed"}' ;;
  *) echo '{"permission": "allow"}' ;;
esac
"""


@needs_root("needs root to own the workspace as root")
def test_through_the_client_a_repository_without_commits_gets_its_guards_answer(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    tmp_path.chmod(0o755)
    ws = tmp_path / "fresh"
    (ws / ".cursor").mkdir(parents=True)
    (ws / ".cursor" / "guard.sh").write_text(GUARD)
    (ws / ".cursor" / "guard.sh").chmod(0o755)
    (ws / ".cursor" / "hooks.json").write_text(
        json.dumps(
            {
                "version": 1,
                "hooks": {
                    "beforeShellExecution": [
                        {"command": ".cursor/guard.sh", "matcher": "git commit", "failClosed": True}
                    ]
                },
            }
        )
    )
    init_repo(ws)
    (ws / ".env").write_text("TOKEN=1\n")
    git(ws, "add", ".env")
    state = tmp_path / "state"
    daemon = daemon_process(
        ["--workspace", str(ws), "--state-dir", str(state),
         "--enterprise-hooks", str(tmp_path / "none.json"), "--isolation", "session"],
        state=state, worker_id=docker_tracker.worker_id,
    ).start()  # fmt: skip
    try:
        event = {
            "hook_event_name": "beforeShellExecution",
            "conversation_id": "c1",
            "generation_id": "g1",
            "cursor_version": "1.7.0",
            "workspace_roots": [str(ws)],
            "command": "git commit -m wip",
            "cwd": str(ws),
        }
        env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
        proc = run_client(["hook", "beforeShellExecution"], event, env=env)
    finally:
        daemon.stop()
    assert proc.returncode == 0, proc.stderr.decode()
    # the repository's own failClosed guard answered: no fail-open for want of a commit
    answer = json.loads(proc.stdout)
    assert answer["permission"] == "deny", proc.stderr.decode()
    # denied by what the guard saw staged, not for a failure of the guard (failClosed)
    assert answer["user_message"] == "a staged .env would be committed"
    assert b"fail-open" not in proc.stderr
    decision = [r for r in read_records(state / "audit.log") if r["kind"] == "decision"][-1]
    assert decision["commit"] is None


def test_an_empty_repository_is_cloned_and_answered_not_refused(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    origin = tmp_path / "empty.git"
    bare_repo(origin)
    state = tmp_path / "state"
    settings = load_settings(
        environ={},
        overrides={
            "state_dir": state,
            "worker_id": docker_tracker.worker_id,
            "sources.enterprise_hooks": tmp_path / "none.json",
            "workspace.repo": origin.as_uri(),
        },
    )
    event = {
        "hook_event_name": "stop",
        "conversation_id": "c1",
        "generation_id": "g1",
        "cursor_version": "1.7.0",
        "status": "completed",
        "loop_count": 0,
    }
    for _ in range(2):  # a process clones, the next adopts the clone it finds
        with Worker(settings) as worker:
            assert worker.handle(json.dumps(event).encode()).answer == {}
    decisions = [r for r in read_records(state / "audit.log") if r["kind"] == "decision"]
    assert [d["commit"] for d in decisions] == [None, None]
