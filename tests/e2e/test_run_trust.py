"""A hostile repository against the operator's trust policy, end to end with real containers:
scripts named with shell syntax under a pinned digest, a relative team-hooks path, a symlink
to a host file outside the checkout, and what a hook learns from its HOME and mount table;
through `cloudrunner run`, `cloudrunner serve` and `cloudrunner validate`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Deployment, cloned_deployment
from tests.support.daemon_process import daemon_process, run_client
from tests.support.docker_tracking import DockerTracker
from tests.support.inotify_watch import opens_of

pytestmark = pytest.mark.docker

DENY = json.dumps({"permission": "deny", "agent_message": "approved script ran"})
#: each command form names a script; the dict says which file an edit goes to
FORMS = {
    "subshell": ("(.cursor/hooks/g.sh)", "g.sh"),
    "list": (".cursor/hooks/g.sh; true", "g.sh"),
    "pipeline": (".cursor/hooks/g.sh|cat", "g.sh"),
    "variable": ("$CURSOR_PROJECT_DIR/.cursor/hooks/g.sh", "g.sh"),
    "absolute": ("{ws}/.cursor/hooks/g.sh", "g.sh"),
    "sourced-sibling": (".cursor/hooks/main.sh", "lib.sh"),
}


@pytest.fixture
def deployment(tmp_path: Path, docker_tracker: DockerTracker) -> Deployment:
    """The demo deployment, cloned once (hook isolation)."""
    return cloned_deployment(tmp_path, docker_tracker.worker_id)


def _scripts(ws: Path) -> None:
    hooks = ws / ".cursor" / "hooks"
    (hooks / "g.sh").write_text(f"#!/bin/sh\ncat >/dev/null\necho '{DENY}'\n")
    (hooks / "main.sh").write_text('#!/bin/sh\n. "$(dirname "$0")/lib.sh"\n')
    (hooks / "lib.sh").write_text(f"cat >/dev/null\necho '{DENY}'\n")
    for name in ("g.sh", "main.sh", "lib.sh"):
        (hooks / name).chmod(0o755)


def _use_form(ws: Path, form: str) -> None:
    command = FORMS[form][0].replace("{ws}", str(ws))
    hooks = {"version": 1, "hooks": {"beforeShellExecution": [{"command": command}]}}
    (ws / ".cursor" / "hooks.json").write_text(json.dumps(hooks))


def _digest(ws: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "hooks", "digest", "--config", "/dev/null",
         str(ws)], capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return proc.stdout.strip()


def _approve_every_form(deployment: Deployment) -> Path:
    ws = deployment.workspace
    _scripts(ws)
    digests = []
    for form in FORMS:
        _use_form(ws, form)
        digests.append(_digest(ws))
    config = deployment.root / "pinned.toml"
    config.write_text(f"[sources]\nproject_digests = {json.dumps(digests)}\n")
    return config


def _check_every_form(deployment: Deployment, ask: Callable[[], dict[str, Any]]) -> None:
    hooks = deployment.workspace / ".cursor" / "hooks"
    for form, (_, edited) in FORMS.items():
        _use_form(deployment.workspace, form)
        assert ask()["permission"] == "deny", f"{form}: the approved script runs"
        original = (hooks / edited).read_text()
        (hooks / edited).write_text(original.replace("cat >/dev/null", "cat >/dev/null # edited"))
        try:
            assert ask()["permission"] == "allow", f"{form}: the edited script is refused"
        finally:
            (hooks / edited).write_text(original)
    refusals = [
        r for r in deployment.records()
        if r["kind"] == "skipped" and r.get("diagnostic", {}).get("code") == "project-not-approved"
    ]  # fmt: skip
    assert len(refusals) >= len(FORMS)


def test_edited_scripts_under_every_shell_form_are_unapproved_through_run(
    deployment: Deployment,
) -> None:
    config = _approve_every_form(deployment)
    flags = [*deployment.flags(), "--config", str(config)]

    def ask() -> dict[str, Any]:
        proc = deployment.run(deployment.shell_event(), flags=flags)
        assert proc.returncode == 0, proc.stderr.decode()
        answer: dict[str, Any] = json.loads(proc.stdout)
        return answer

    _check_every_form(deployment, ask)


@pytest.fixture
def served(deployment: Deployment) -> Iterator[Callable[[dict[str, Any]], dict[str, Any]]]:
    config = _approve_every_form(deployment)
    daemon = daemon_process(
        [*deployment.flags(), "--config", str(config)], state=deployment.state,
        worker_id=deployment.worker_id,
    ).start()  # fmt: skip

    def ask(payload: dict[str, Any]) -> dict[str, Any]:
        env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
        proc = run_client(["hook", str(payload["hook_event_name"])], payload, env=env)
        assert proc.returncode == 0, proc.stderr.decode()
        answer: dict[str, Any] = json.loads(proc.stdout)
        return answer

    try:
        yield ask
    finally:
        daemon.stop()


def test_edited_scripts_under_every_shell_form_are_unapproved_through_serve(
    deployment: Deployment, served: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    _check_every_form(deployment, lambda: served(deployment.shell_event()))


def test_a_relative_team_path_of_managed_settings_never_loads_the_repositorys(
    deployment: Deployment,
) -> None:
    """Managed-only settings with `team_hooks = "team"`, `run` started inside the
    repository: the path is the settings file's directory's, not the repository's."""
    ws = deployment.workspace
    (ws / "team").mkdir()
    hooks = {"version": 1, "hooks": {"beforeShellExecution": [
        {"command": f"cat >/dev/null; echo '{DENY}'"}]}}  # fmt: skip
    (ws / "team" / "hooks.json").write_text(json.dumps(hooks))
    etc = deployment.root / "etc"
    etc.mkdir()
    config = etc / "config.toml"
    config.write_text('[sources]\nteam_hooks = "team"\nallowed = ["enterprise", "team"]\n')
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "run", *deployment.flags(), "--config",
         str(config)], input=json.dumps(deployment.shell_event()).encode(), capture_output=True,
        env=deployment.base_env(), cwd=ws, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["permission"] == "allow"
    received = [r for r in deployment.records() if r["kind"] == "received"][-1]
    assert received["hooks"] == [] or all(h.get("source") != "team" for h in received["hooks"])
    text = json.dumps([r for r in deployment.records() if r.get("source") == "team"])
    text += proc.stderr.decode()
    assert str(etc / "team") in text, f"the team path is the settings file's directory's: {text}"
    assert str(ws / "team" / "hooks.json") not in text


def _outside_symlink(deployment: Deployment) -> Path:
    outside = deployment.root / "outside" / "secret.sh"
    outside.parent.mkdir()
    outside.write_text("#!/usr/bin/env host-only-interpreter\necho host file\n")
    outside.chmod(0o755)
    link = deployment.workspace / ".cursor" / "hooks" / "x.sh"
    link.symlink_to(outside)
    hooks = {"version": 1, "hooks": {"beforeShellExecution": [
        {"command": ".cursor/hooks/x.sh"}, {"command": "sh < .cursor/hooks/x.sh"}]}}  # fmt: skip
    (deployment.workspace / ".cursor" / "hooks.json").write_text(json.dumps(hooks))
    return outside


def test_no_host_file_outside_the_checkout_is_opened_by_run_serve_or_validate(
    deployment: Deployment,
) -> None:
    outside = _outside_symlink(deployment)
    ws = deployment.workspace
    pinned = deployment.root / "pin.toml"
    pinned.write_text(f'[sources]\nproject_digests = ["{_digest(ws)}"]\n')
    with opens_of(outside) as seen:
        deployment.answer(deployment.shell_event())
        proc = deployment.run(deployment.shell_event(), flags=[*deployment.flags(), "--config",
                                                         str(pinned)])  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
        validated = subprocess.run(
            [sys.executable, "-m", "cloudrunner", "validate", str(ws)], capture_output=True,
            env=deployment.base_env(), timeout=300, check=False,
        )  # fmt: skip
        assert b"Traceback" not in validated.stderr, validated.stderr.decode()
        daemon = daemon_process(
            deployment.flags(), state=deployment.state, worker_id=deployment.worker_id
        ).start()
        try:
            env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
            served = run_client(["hook", "beforeShellExecution"], deployment.shell_event(), env=env)
            assert served.returncode == 0, served.stderr.decode()
        finally:
            daemon.stop()
    assert seen == [], f"the outside file was opened: {seen}"
    assert b"host-only-interpreter" not in validated.stdout + validated.stderr


@pytest.mark.parametrize("isolation", ["hook", "session"])
def test_a_hooks_home_is_at_a_neutral_path(
    tmp_path: Path, docker_tracker: DockerTracker, isolation: str
) -> None:
    deployment = cloned_deployment(tmp_path, docker_tracker.worker_id, isolation)
    state = str(deployment.state)
    probe = (
        'cat >/dev/null; printf %s "$HOME" > home.txt; cat /proc/self/mountinfo > mounts.txt; '
        f"if [ -e {state} ]; then echo yes; else echo no; fi > state.txt; "
        'touch "$HOME/written"; echo \'{"permission": "allow"}\''
    )
    hooks = {"version": 1, "hooks": {"beforeShellExecution": [{"command": probe}]}}
    (deployment.workspace / ".cursor" / "hooks.json").write_text(json.dumps(hooks))
    deployment.answer(deployment.shell_event())
    ws = deployment.workspace
    assert (ws / "home.txt").read_text() == "/home/hook"
    assert (ws / "state.txt").read_text().strip() == "no", "the state directory is visible"
    mount_points = [line.split()[4] for line in (ws / "mounts.txt").read_text().splitlines()]
    assert "/home/hook" in mount_points
    assert not [m for m in mount_points if m.startswith(state)], mount_points
    assert list((deployment.state / "homes").glob("*/project/written")), "the home persists"


def test_team_hooks_inside_a_workspace_given_by_the_payload_are_refused_through_serve(
    deployment: Deployment,
) -> None:
    """No workspace in the settings (so nothing to refuse at load): the event names it, and
    the team path inside it is refused for that event."""
    ws = deployment.workspace
    (ws / "team").mkdir()
    hooks = {"version": 1, "hooks": {"beforeShellExecution": [
        {"command": f"cat >/dev/null; echo '{DENY}'"}]}}  # fmt: skip
    (ws / "team" / "hooks.json").write_text(json.dumps(hooks))
    flags = [
        "--enterprise-hooks", str(deployment.enterprise / "hooks.json"),
        "--state-dir", str(deployment.state), "--audit-log", str(deployment.audit_log),
        "--team-hooks", str(ws / "team"),
    ]  # fmt: skip
    daemon = daemon_process(flags, state=deployment.state, worker_id=deployment.worker_id).start()
    try:
        env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
        proc = run_client(["hook", "beforeShellExecution"], deployment.shell_event(), env=env)
        assert proc.returncode == 0, proc.stderr.decode()
        assert json.loads(proc.stdout)["permission"] == "allow"
    finally:
        daemon.stop()
    team = [r for r in deployment.records() if r.get("source") == "team"]
    refused = [r for r in team if r.get("diagnostic", {}).get("code") == "managed-path-refused"]
    assert refused and "inside the workspace" in refused[-1]["reason"]
