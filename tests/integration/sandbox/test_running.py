"""Running hooks in both isolation modes and both runtimes: the normal path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox import ExecRequest
from cloudrunner.sandbox.limits import FALLBACK_HOOK_UID
from tests.integration.sandbox.conftest import WORKSPACE_UID, SandboxFactory
from tests.support.ci import needs_root
from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker


def test_stdin_env_and_exit_code_reach_the_hook(
    make_sandbox: SandboxFactory, isolation: str, runtime: str, workspace: Path
) -> None:
    sandbox = make_sandbox(isolation, runtime)
    result = sandbox.run(
        ExecRequest(
            'cat; echo; echo "$CURSOR_PROJECT_DIR"; pwd; id -u; echo err >&2; exit 3',
            str(workspace),
            stdin=b'{"hook_event_name":"stop"}',
            env={"CURSOR_PROJECT_DIR": str(workspace)},
            timeout_s=60,
        )
    )
    assert result.outcome is Outcome.ERROR, result.message
    assert result.exit_code == 3
    lines = result.stdout.decode().splitlines()
    assert lines == [
        '{"hook_event_name":"stop"}',
        str(workspace),
        str(workspace),
        str(WORKSPACE_UID),
    ]
    assert result.stderr == b"err\n"
    assert result.sandbox_id
    assert result.attestation["runtime"] == runtime
    assert result.attestation["isolation"] == isolation


def test_the_hook_sees_only_the_callers_environment_and_the_images(
    make_sandbox: SandboxFactory,
    isolation: str,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLOUDRUNNER_TEST_WORKER_SECRET", "do-not-leak")
    sandbox = make_sandbox(isolation)
    result = sandbox.run(
        ExecRequest("env", str(workspace), env={"CURSOR_VERSION": "1.7"}, timeout_s=60)
    )
    assert result.outcome is Outcome.OK, result.message
    env = dict(line.split("=", 1) for line in result.stdout.decode().splitlines())
    assert "CLOUDRUNNER_TEST_WORKER_SECRET" not in env
    assert "do-not-leak" not in result.stdout.decode()
    assert env["CURSOR_VERSION"] == "1.7"
    # The image's own ENV, plus what the shell and Docker set for every process.
    assert set(env) <= {
        "CURSOR_VERSION",
        "PATH",
        "LANG",
        "DEBIAN_FRONTEND",
        "HOSTNAME",
        "HOME",
        "PWD",
        "SHLVL",
    }


@needs_root("needs root to chown the workspace")
def test_a_root_owned_workspace_runs_hooks_as_the_fixed_uid(
    make_sandbox: SandboxFactory, isolation: str, workspace: Path
) -> None:
    os.chown(workspace, 0, 0)
    sandbox = make_sandbox(isolation)
    result = sandbox.run(ExecRequest("id -u; id -g", str(workspace), timeout_s=60))
    assert result.stdout.decode().split() == [str(FALLBACK_HOOK_UID)] * 2
    assert result.attestation["hook_user"] == f"{FALLBACK_HOOK_UID}:{FALLBACK_HOOK_UID}"


def test_the_attestation_records_the_observed_hardening(
    make_sandbox: SandboxFactory, isolation: str, runtime: str, workspace: Path
) -> None:
    sandbox = make_sandbox(isolation, runtime, limits={"memory": "200MiB", "pids": 99})
    att = sandbox.run(ExecRequest("true", str(workspace), timeout_s=60)).attestation
    assert att["cap_drop"] == ["ALL"]
    assert "no-new-privileges" in att["security_opt"]
    assert att["read_only_rootfs"] is True
    assert att["memory"] == att["memory_swap"] == 200 * 1024 * 1024
    assert att["pids_limit"] == 99
    assert att["network"] == "none"
    assert att["image_id"].startswith("sha256:")
    assert att["runtime"] == runtime
    if isolation == "session":
        # The agent's only capabilities, each with its reason; the hooks get none.
        assert sorted(att["cap_add"]) == ["KILL", "SETGID", "SETUID"]
        assert att["user"] == "0:0"
        assert att["hook_user"] == f"{WORKSPACE_UID}:{WORKSPACE_UID}"
        assert att["agent_cap_bounding"] == "0xe0"
    else:
        assert att["cap_add"] == {}
        assert att["user"] == f"{WORKSPACE_UID}:{WORKSPACE_UID}"


def test_hooks_have_no_capabilities(
    make_sandbox: SandboxFactory, isolation: str, runtime: str, workspace: Path
) -> None:
    sandbox = make_sandbox(isolation, runtime)
    result = sandbox.run(ExecRequest("grep ^Cap /proc/self/status", str(workspace), timeout_s=60))
    caps = dict(line.split(":") for line in result.stdout.decode().splitlines())
    assert {"CapPrm", "CapEff", "CapInh"} <= set(caps)  # gVisor has no CapAmb line
    for name, value in caps.items():
        if name != "CapBnd":
            assert int(value.strip(), 16) == 0, (name, caps)


def test_config_dirs_are_readable_at_their_host_path_but_not_writable(
    make_sandbox: SandboxFactory, isolation: str, workspace: Path, tmp_path: Path
) -> None:
    team = tmp_path / "team-hooks"
    team.mkdir()
    (team / "hooks.json").write_text('{"version": 1}\n')
    team.chmod(0o777)  # even a world-writable directory is read-only in the sandbox
    sandbox = make_sandbox(isolation, config_dirs=(team,))
    result = sandbox.run(
        ExecRequest(
            f"cat {team}/hooks.json; touch {team}/new || echo refused", str(team), timeout_s=60
        )
    )
    assert result.stdout.decode().splitlines() == ['{"version": 1}', "refused"]
    assert b"Read-only file system" in result.stderr
    assert not (team / "new").exists()


def test_a_working_directory_outside_the_mounts_is_a_sandbox_error(
    make_sandbox: SandboxFactory, isolation: str
) -> None:
    sandbox = make_sandbox(isolation)
    result = sandbox.run(ExecRequest("true", "/etc", timeout_s=60))
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert "outside the workspace" in result.message


def test_hook_mode_removes_its_container_every_time(
    make_sandbox: SandboxFactory, docker_tracker: DockerTracker, workspace: Path
) -> None:
    sandbox = make_sandbox("hook")
    ids = set()
    for command in ("true", "exit 5", "sleep 30"):
        result = sandbox.run(ExecRequest(command, str(workspace), timeout_s=2))
        ids.add(result.sandbox_id)
        assert docker_tracker.labelled_containers() == []
    assert len(ids) == 3


def test_session_mode_reuses_one_warm_container_and_close_removes_it(
    make_sandbox: SandboxFactory, docker_tracker: DockerTracker, workspace: Path, runtime: str
) -> None:
    sandbox = make_sandbox("session", runtime)
    first = sandbox.run(ExecRequest("echo 1", str(workspace), timeout_s=60))
    second = sandbox.run(ExecRequest("echo 2", str(workspace), timeout_s=60))
    assert first.sandbox_id == second.sandbox_id
    assert len(docker_tracker.labelled_containers()) == 1
    sandbox.close()
    assert docker_tracker.labelled_containers() == []
    closed = sandbox.run(ExecRequest("echo 3", str(workspace), timeout_s=60))
    assert closed.outcome is Outcome.SANDBOX_ERROR
