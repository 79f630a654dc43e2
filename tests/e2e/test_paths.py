"""Paths as paths, end to end through `cloudrunner run` and `serve` + `hook`, real containers:
awkward workspace paths, symlinked workspaces, relative and git-internal roots, repository
files that lead outside the repository, and whose containers a starting worker reaps."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from cloudrunner.audit.verify import verify_log
from cloudrunner.sandbox.base import HOST_LABEL, WORKER_LABEL
from tests.e2e.conftest import Deployment, make_deployment
from tests.support.daemon_process import DaemonProcess, daemon_process, run_client
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import committed_repo

pytestmark = pytest.mark.docker

#: the hook uid when root owns the workspace (cloudrunner's fixed fallback)
HOOK_UID = 10001
SECRET = "OUTSIDE-SECRET-7c1e9a"

WHERE_SH = """#!/bin/sh
root=$(jq -r '.workspace_roots[0]')
echo hook-was-here > "$PWD/written-by-hook"
jq -n --arg pwd "$PWD" --arg dir "$CURSOR_PROJECT_DIR" --arg claude "$CLAUDE_PROJECT_DIR" \\
  --arg root "$root" --arg readme "$(cat README)" \\
  '{additional_context: ("pwd=" + $pwd + "|dir=" + $dir + "|claude=" + $claude
                          + "|root=" + $root + "|readme=" + $readme)}'
"""

WHERE_HOOKS = {"version": 1, "hooks": {"postToolUse": [{"command": ".cursor/hooks/where.sh"}]}}


def _checkout(path: Path, hooks: dict[str, Any] | None = None) -> Path:
    """A git checkout at `path` with the `where` project hook, owned by the hook uid."""
    (path / ".cursor" / "hooks").mkdir(parents=True)
    (path / "README").write_text("workspace readme")
    (path / ".cursor" / "hooks.json").write_text(json.dumps(hooks or WHERE_HOOKS))
    script = path / ".cursor" / "hooks" / "where.sh"
    script.write_text(WHERE_SH)
    script.chmod(0o755)
    committed_repo(path, "paths")
    if os.geteuid() == 0:
        for directory, dirs, files in os.walk(path):
            os.lchown(directory, HOOK_UID, HOOK_UID)
            for entry in (*dirs, *files):
                os.lchown(os.path.join(directory, entry), HOOK_UID, HOOK_UID)
    return path


def _adopting(base: Path, workspace: Path | None, worker_id: str, isolation: str) -> Deployment:
    """A deployment that adopts `workspace` (None: the payload's workspace_roots)."""
    base.mkdir(parents=True, exist_ok=True)
    return Deployment(
        base, base / "no-origin", base / "no-enterprise", workspace or base, base / "state",
        worker_id, isolation,
    )  # fmt: skip


def _flags(deployment: Deployment, workspace: Path | str | None) -> list[str]:
    flags = [
        "--enterprise-hooks", str(deployment.enterprise / "hooks.json"),
        "--state-dir", str(deployment.state), "--audit-log", str(deployment.audit_log),
        "--isolation", deployment.isolation,
    ]  # fmt: skip
    return flags if workspace is None else [*flags, "--workspace", str(workspace)]


def _tool_event(deployment: Deployment, root: str) -> dict[str, Any]:
    return {
        **deployment.event("postToolUse", tool_name="Shell", tool_input={}, tool_output=""),
        "workspace_roots": [root],
    }


def _where(answer: dict[str, Any]) -> dict[str, str]:
    parts = str(answer["additional_context"]).split("|")
    return dict(part.split("=", 1) for part in parts)


def _no_sandbox_was_made(tracker: DockerTracker) -> bool:
    return tracker.labelled_containers() == []


# --------------------------------------------------------------------------- awkward paths


@pytest.mark.parametrize("isolation", ["hook", "session"])
def test_run_in_a_workspace_whose_path_holds_a_colon_comma_space_and_unicode(
    tmp_path: Path, docker_tracker: DockerTracker, isolation: str
) -> None:
    ws = _checkout(tmp_path / "repos" / "team:a,b=c d ü")
    deployment = _adopting(tmp_path, ws, docker_tracker.worker_id, isolation)
    proc = deployment.run(_tool_event(deployment, str(ws)), flags=_flags(deployment, ws))
    assert proc.returncode == 0, proc.stderr.decode()
    seen = _where(json.loads(proc.stdout))
    assert seen == {
        "pwd": str(ws), "dir": str(ws), "claude": str(ws), "root": str(ws),
        "readme": "workspace readme",
    }  # fmt: skip
    assert (ws / "written-by-hook").read_text() == "hook-was-here\n"
    (hook,) = [r for r in deployment.records() if r["kind"] == "hook"]
    assert hook["outcome"] == "ok"
    mounts = hook["attestation"]["mounts"]
    assert {"source": str(ws), "target": str(ws), "mode": "rw"} in mounts
    (decision,) = [r for r in deployment.records() if r["kind"] == "decision"]
    assert decision["workspace"] == str(ws)


def test_serve_and_hook_in_a_workspace_whose_path_holds_a_colon(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    ws = _checkout(tmp_path / "repos" / "x:ro")
    deployment = _adopting(tmp_path, ws, docker_tracker.worker_id, "session")
    daemon = daemon_process(
        _flags(deployment, ws), state=deployment.state, worker_id=deployment.worker_id
    ).start()
    try:
        proc = run_client(
            ["hook", "postToolUse"],
            _tool_event(deployment, str(ws)),
            env={"CLOUDRUNNER_SOCKET": str(daemon.socket_path)},
        )
        assert proc.returncode == 0, proc.stderr.decode()
        assert _where(json.loads(proc.stdout))["pwd"] == str(ws)
        assert (ws / "written-by-hook").exists()
    finally:
        daemon.stop()
    assert verify_log(deployment.audit_log).ok


# --------------------------------------------------------------------------- symlinks


@pytest.mark.parametrize("isolation", ["hook", "session"])
def test_a_symlinked_workspace_runs_hooks_in_its_real_path_and_leaves_the_payload_as_sent(
    tmp_path: Path, docker_tracker: DockerTracker, isolation: str
) -> None:
    real = _checkout(tmp_path / "real" / "checkout")
    link = tmp_path / "link-to-checkout"
    link.symlink_to(real)
    deployment = _adopting(tmp_path, link, docker_tracker.worker_id, isolation)
    proc = deployment.run(_tool_event(deployment, str(link)), flags=_flags(deployment, link))
    assert proc.returncode == 0, proc.stderr.decode()
    seen = _where(json.loads(proc.stdout))
    # The hook runs in the real path, and is told it; the payload stays byte for byte.
    assert (seen["pwd"], seen["dir"], seen["claude"]) == (str(real),) * 3
    assert seen["root"] == str(link)
    (hook,) = [r for r in deployment.records() if r["kind"] == "hook"]
    assert hook["outcome"] == "ok", hook["reason"]
    (decision,) = [r for r in deployment.records() if r["kind"] == "decision"]
    assert decision["workspace"] == str(real)
    assert decision["payload"]["workspace_roots"] == [str(link)]


def test_serve_without_a_workspace_follows_a_symlinked_payload_root(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    real = _checkout(tmp_path / "real" / "checkout")
    link = tmp_path / "link"
    link.symlink_to(real)
    deployment = _adopting(tmp_path, None, docker_tracker.worker_id, "hook")
    daemon = daemon_process(
        _flags(deployment, None), state=deployment.state, worker_id=deployment.worker_id
    ).start()
    try:
        reply = daemon.event("postToolUse", _tool_event(deployment, str(link)))
        assert reply.status == 200, reply.body
        seen = _where(json.loads(reply.body))
        assert (seen["pwd"], seen["root"]) == (str(real), str(link))
    finally:
        daemon.stop()


def test_team_hooks_given_through_a_symlink_run_in_the_real_directory(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    ws = _checkout(tmp_path / "repo", hooks={"version": 1, "hooks": {}})
    team = tmp_path / "managed:team"
    team.mkdir()
    team.chmod(0o755)
    (team / "hooks.json").write_text(
        json.dumps(
            {
                "version": 1,
                "hooks": {
                    "postToolUse": [
                        {"command": """jq -n --arg d "$PWD" '{additional_context: $d}'"""}
                    ]
                },
            }
        )
    )
    link = tmp_path / "team-link"
    link.symlink_to(team)
    deployment = _adopting(tmp_path, ws, docker_tracker.worker_id, "hook")
    proc = deployment.run(
        _tool_event(deployment, str(ws)), flags=[*_flags(deployment, ws), "--team-hooks", str(link)]
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout) == {"additional_context": str(team)}


def test_a_daemons_workspace_swapped_for_a_symlink_is_refused_not_followed(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    """The daemon resolved the workspace once; the agent then renames the checkout away and
    puts a symlink to another user's directory in its place. Following it would mount that
    directory read-write for hooks running as its owner (and probe, and read its hooks)."""
    ws = _checkout(tmp_path / "repo")
    victim = tmp_path / "victim-home"
    victim.mkdir()
    (victim / ".profile").write_text("victim's\n")
    if os.geteuid() == 0:
        os.chown(victim, 2000, 2000)
        os.chown(victim / ".profile", 2000, 2000)
    deployment = _adopting(tmp_path, ws, docker_tracker.worker_id, "hook")
    daemon = daemon_process(
        _flags(deployment, ws), state=deployment.state, worker_id=deployment.worker_id
    ).start()
    try:
        first = daemon.event("postToolUse", _tool_event(deployment, str(ws)))
        assert first.status == 200, first.body
        ws.rename(tmp_path / "repo-moved-away")
        ws.symlink_to(victim)
        second = daemon.event("postToolUse", _tool_event(deployment, str(ws)))
        assert second.status == 422, second.body
        error = json.loads(second.body)["error"]
        assert error["code"] == "workspace-unavailable"
        assert "changed into a symlink" in error["message"]
    finally:
        daemon.stop()
    assert sorted(p.name for p in victim.iterdir()) == [".profile"]
    assert (victim / ".profile").read_text() == "victim's\n"
    assert [r["kind"] for r in deployment.records()][-1] == "refused"


# --------------------------------------------------------------------------- refused roots


def test_run_refuses_a_relative_workspace_root_from_the_payload(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    # A checkout at the relative path from the worker's cwd: it must not be used.
    _checkout(tmp_path / "cwd" / "relative" / "repo")
    deployment = _adopting(tmp_path, None, docker_tracker.worker_id, "hook")
    event = _tool_event(deployment, "relative/repo")
    data = json.dumps(event).encode()
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "run", *_flags(deployment, None)],
        input=data, capture_output=True, env=deployment.base_env(), cwd=tmp_path / "cwd",
        timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "relative path" in err[0] and "workspace_roots" in err[0]
    assert "Traceback" not in proc.stderr.decode()
    assert proc.stdout == b""
    (refused,) = [r for r in deployment.records() if r["kind"] == "refused"]
    assert "relative path" in refused["reason"]
    assert not (tmp_path / "cwd" / "relative" / "repo" / "written-by-hook").exists()
    assert _no_sandbox_was_made(docker_tracker)


def test_serve_answers_a_relative_root_with_workspace_unavailable(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    deployment = _adopting(tmp_path, None, docker_tracker.worker_id, "hook")
    daemon = daemon_process(
        _flags(deployment, None), state=deployment.state, worker_id=deployment.worker_id
    ).start()
    try:
        reply = daemon.event("postToolUse", _tool_event(deployment, "./repo"))
        assert reply.status == 422
        error = json.loads(reply.body)["error"]
        assert error["code"] == "workspace-unavailable" and "relative" in error["message"]
    finally:
        daemon.stop()
    kinds = [r["kind"] for r in deployment.records()]
    assert kinds.count("refused") == 1 and "hook" not in kinds


@pytest.mark.parametrize("inner", [".git", ".git/hooks"])
def test_a_git_directory_is_refused_as_workspace(
    tmp_path: Path, docker_tracker: DockerTracker, inner: str
) -> None:
    repo = _checkout(tmp_path / "repo")
    deployment = _adopting(tmp_path, None, docker_tracker.worker_id, "hook")
    # as the configured workspace ...
    proc = deployment.run(
        _tool_event(deployment, str(repo / inner)), flags=_flags(deployment, repo / inner)
    )
    assert proc.returncode != 0
    (line,) = proc.stderr.decode().strip().splitlines()
    assert ".git directory or inside one" in line
    # ... and as the payload's root
    proc = deployment.run(
        _tool_event(deployment, str(repo / inner)), flags=_flags(deployment, None)
    )
    assert proc.returncode != 0 and ".git directory" in proc.stderr.decode()
    kinds = [r["kind"] for r in deployment.records()]
    assert kinds == ["refused", "refused"]
    assert not list(repo.rglob("written-by-hook"))
    assert _no_sandbox_was_made(docker_tracker)


def test_a_file_as_workspace_is_refused(tmp_path: Path, docker_tracker: DockerTracker) -> None:
    repo = _checkout(tmp_path / "repo")
    deployment = _adopting(tmp_path, None, docker_tracker.worker_id, "hook")
    proc = deployment.run(
        _tool_event(deployment, str(repo / "README")), flags=_flags(deployment, None)
    )
    assert proc.returncode != 0
    assert "not a directory" in proc.stderr.decode()
    assert [r["kind"] for r in deployment.records()] == ["refused"]


# --------------------------------------------------------------------------- files leading out


@pytest.fixture
def outside_file(tmp_path: Path) -> Path:
    """A file outside every repository, full of a value that must never be quoted."""
    secret = tmp_path / "host" / "secret.json"
    secret.parent.mkdir()
    secret.write_text(
        json.dumps(
            {
                "build": {"dockerfile": SECRET, "context": SECRET},
                "install": f"echo {SECRET}",
                SECRET: SECRET,
                "version": 1,
                "hooks": {"beforeShellExecution": [{"command": f"echo {SECRET}"}]},
            }
        )
    )
    return secret


def _everything_written(deployment: Deployment, proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stdout.decode() + proc.stderr.decode() + deployment.audit_log.read_text()


@pytest.fixture
def no_environment_images(
    docker_client: docker.DockerClient, docker_tracker: DockerTracker
) -> Iterator[None]:
    yield
    for image in docker_client.images.list(
        filters={"label": f"cloudrunner.worker={docker_tracker.worker_id}"}
    ):
        docker_client.images.remove(image.id, force=True)


@pytest.mark.usefixtures("no_environment_images")
def test_an_environment_json_leading_outside_is_refused_and_never_quoted(
    tmp_path: Path, docker_tracker: DockerTracker, outside_file: Path
) -> None:
    hooks = {
        "version": 1,
        "hooks": {
            "beforeShellExecution": [{"command": ".cursor/hooks/where.sh", "failClosed": True}]
        },
    }
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".cursor").mkdir()
    (repo / ".cursor" / "environment.json").symlink_to(outside_file)
    _checkout_in_place(repo, hooks)
    deployment = _adopting(tmp_path, repo, docker_tracker.worker_id, "hook")
    deployment.extra_env["CLOUDRUNNER_USE_ENVIRONMENT_JSON"] = "true"
    event = {**deployment.event("beforeShellExecution", command="ls", cwd=str(repo), sandbox=False),
             "workspace_roots": [str(repo)]}  # fmt: skip
    proc = deployment.run(event, flags=_flags(deployment, repo))
    assert proc.returncode == 0, proc.stderr.decode()
    answer = json.loads(proc.stdout)
    # failClosed: the project hook could not get its environment, so it blocks, saying why
    assert answer["permission"] == "deny"
    assert "outside" in answer["agent_message"]
    (hook,) = [r for r in deployment.records() if r["kind"] == "hook"]
    assert hook["outcome"] == "sandbox_error" and "environment.json" in hook["reason"]
    assert SECRET not in _everything_written(deployment, proc)
    assert _no_sandbox_was_made(docker_tracker)


def test_a_hooks_json_leading_outside_is_refused_and_never_quoted(
    tmp_path: Path, docker_tracker: DockerTracker, outside_file: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".cursor").mkdir(parents=True)
    (repo / ".cursor" / "hooks.json").symlink_to(outside_file)
    (repo / "README").write_text("x")
    committed_repo(repo, "link")
    deployment = _adopting(tmp_path, repo, docker_tracker.worker_id, "hook")
    event = {**deployment.event("beforeShellExecution", command="ls", cwd=str(repo), sandbox=False),
             "workspace_roots": [str(repo)]}  # fmt: skip
    proc = deployment.run(event, flags=_flags(deployment, repo))
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout) == {"permission": "allow"}
    skipped = [
        r for r in deployment.records() if r["kind"] == "skipped" and r["source"] == "project"
    ]
    assert [s["diagnostic"]["code"] for s in skipped] == ["symlink-escape"]
    assert skipped[0]["source_status"] == "broken"
    assert "hook" not in [r["kind"] for r in deployment.records()]
    assert SECRET not in _everything_written(deployment, proc)
    assert _no_sandbox_was_made(docker_tracker)


def _checkout_in_place(path: Path, hooks: dict[str, Any]) -> None:
    """`_checkout` for a directory that already holds files (a symlink in .cursor)."""
    (path / ".cursor" / "hooks").mkdir(parents=True, exist_ok=True)
    (path / "README").write_text("workspace readme")
    (path / ".cursor" / "hooks.json").write_text(json.dumps(hooks))
    script = path / ".cursor" / "hooks" / "where.sh"
    script.write_text(WHERE_SH)
    script.chmod(0o755)
    committed_repo(path, "paths")


# --------------------------------------------------------------------------- the reaper


def _present(client: docker.DockerClient, cid: str) -> bool:
    try:
        client.containers.get(cid)
    except docker.errors.NotFound:
        return False
    return True


def test_a_starting_worker_reaps_its_own_crashed_sandboxes_never_another_workers(
    tmp_path: Path, docker_client: docker.DockerClient, docker_tracker: DockerTracker
) -> None:
    """Worker A (a daemon with warm session sandboxes) is SIGKILLed. Worker B, another id on
    the same host, runs events: A's sandboxes are not B's to judge (A may be restarting, or
    be another test run), so they stay. A's id starting again reaps them, and records it."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for path in (tmp_path, tmp_path / "a", tmp_path / "b"):
        path.chmod(0o755)
    a = make_deployment(tmp_path / "a", docker_tracker.worker_id)
    a.isolation = "session"
    b = make_deployment(tmp_path / "b", f"{docker_tracker.worker_id}-b")
    b.isolation = "session"
    daemon: DaemonProcess = daemon_process(a.flags(), state=a.state, worker_id=a.worker_id)
    daemon.start()
    try:
        stop = a.event("stop", status="completed", loop_count=0)
        assert daemon.event("stop", stop).status == 200
        left = [c.id for c in docker_tracker.labelled_containers()]
        assert left, "worker A keeps a warm sandbox"
        assert daemon.proc is not None
        daemon.proc.kill()
        daemon.proc.wait(30)
    finally:
        daemon.kill()
    for container_id in left:
        labels = docker_client.containers.get(container_id).labels
        assert (labels[WORKER_LABEL], labels[HOST_LABEL]) == (a.worker_id, socket.gethostname())

    # B runs an event with a sandbox of its own, on the same host and engine.
    assert "followup_message" in b.answer(b.event("stop", status="completed", loop_count=0))
    assert all(_present(docker_client, cid) for cid in left)
    assert not [r for r in b.records() if r["kind"] == "reaped"]
    b_left = docker_client.containers.list(
        all=True, filters={"label": f"{WORKER_LABEL}={b.worker_id}"}
    )
    assert b_left == [], "B's own run removed its sandboxes"

    # A's id starts again (one `cloudrunner run`): it reaps what A left.
    assert "followup_message" in a.answer(stop)
    assert not any(_present(docker_client, cid) for cid in left)
    reaped = [r for r in a.records() if r["kind"] == "reaped"]
    assert {r["container_id"] for r in reaped} == {cid[:12] for cid in left}
    assert all(r["owner"] == a.worker_id for r in reaped)
    assert verify_log(a.audit_log).ok and verify_log(b.audit_log).ok


# --------------------------------------------------------------------------- run and serve+hook


class Asker:
    """Sends an event the way the test's parameter says: `cloudrunner run`, or
    `cloudrunner hook` to a `cloudrunner serve` started with the same flags."""

    def __init__(self, via: str, deployment: Deployment, flags: list[str]) -> None:
        self.via = via
        self.deployment = deployment
        self.flags = flags
        self.daemon: DaemonProcess | None = None

    def __call__(self, event: dict[str, Any], *args: str) -> subprocess.CompletedProcess[bytes]:
        if self.via == "run":
            return self.deployment.run(event, flags=self.flags)
        if self.daemon is None:
            self.daemon = daemon_process(
                self.flags, state=self.deployment.state, worker_id=self.deployment.worker_id,
                env=self.deployment.extra_env,
            ).start()  # fmt: skip
        return run_client(
            ["hook", event["hook_event_name"], *args],
            event,
            env={"CLOUDRUNNER_SOCKET": str(self.daemon.socket_path)},
        )

    def close(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()


@pytest.fixture(params=["run", "serve"])
def asking(request: pytest.FixtureRequest) -> Iterator[Any]:
    made: list[Asker] = []

    def make(deployment: Deployment, flags: list[str]) -> Asker:
        made.append(Asker(str(request.param), deployment, flags))
        return made[-1]

    try:
        yield make
    finally:
        for asker in made:
            asker.close()


def _one_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    text = proc.stderr.decode()
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize(
    ("root", "says"),
    [
        ("relative/repo", "relative path"),
        ("{repo}/.git", ".git directory or inside one"),
        ("{repo}/.git/objects", ".git directory or inside one"),
        ("{repo}/README", "not a directory"),
        ("{repo}/missing", "does not exist"),
    ],
)
def test_an_unusable_root_is_refused_by_run_and_by_the_daemon(
    tmp_path: Path, docker_tracker: DockerTracker, asking: Any, root: str, says: str
) -> None:
    repo = _checkout(tmp_path / "repo")
    deployment = _adopting(tmp_path, None, docker_tracker.worker_id, "hook")
    ask: Asker = asking(deployment, _flags(deployment, None))
    event = {
        **deployment.event(
            "beforeShellExecution", command="rm -rf /", cwd=str(repo), sandbox=False
        ),
        "workspace_roots": [root.format(repo=repo)],
    }
    proc = ask(event, "--fail-closed")
    line = _one_line(proc)
    assert says in line
    if ask.via == "run":
        assert proc.returncode == 2 and proc.stdout == b""
    else:
        # the daemon refused it (422 workspace-unavailable); the client applies its policy
        assert proc.returncode == 0 and "refused the event" in line and "fail-closed" in line
        assert json.loads(proc.stdout)["permission"] == "deny"
    ask.close()
    kinds = [r["kind"] for r in deployment.records()]
    assert kinds == ["refused"]
    assert says in deployment.records()[0]["reason"]
    assert not list(repo.rglob("written-by-hook"))
    assert _no_sandbox_was_made(docker_tracker)


@pytest.mark.usefixtures("no_environment_images")
def test_files_leading_outside_are_never_quoted_by_run_or_the_daemon(
    tmp_path: Path, docker_tracker: DockerTracker, outside_file: Path, asking: Any
) -> None:
    """environment.json and a hook script lead outside; the failClosed project hook blocks
    naming the refusal, and nothing of the outside file reaches any output or record."""
    hooks = {
        "version": 1,
        "hooks": {
            "beforeShellExecution": [{"command": ".cursor/hooks/where.sh", "failClosed": True}]
        },
    }
    repo = tmp_path / "repo"
    (repo / ".cursor").mkdir(parents=True)
    (repo / ".cursor" / "environment.json").symlink_to(outside_file)
    _checkout_in_place(repo, hooks)
    deployment = _adopting(tmp_path, repo, docker_tracker.worker_id, "hook")
    deployment.extra_env["CLOUDRUNNER_USE_ENVIRONMENT_JSON"] = "true"
    ask: Asker = asking(deployment, _flags(deployment, repo))
    event = {**deployment.event("beforeShellExecution", command="ls", cwd=str(repo), sandbox=False),
             "workspace_roots": [str(repo)]}  # fmt: skip
    proc = ask(event)
    assert proc.returncode == 0, proc.stderr.decode()
    answer = json.loads(proc.stdout)
    assert answer["permission"] == "deny" and "outside" in answer["agent_message"]
    ask.close()
    assert SECRET not in _everything_written(deployment, proc)
    (hook,) = [r for r in deployment.records() if r["kind"] == "hook"]
    assert hook["outcome"] == "sandbox_error"
    assert _no_sandbox_was_made(docker_tracker)
