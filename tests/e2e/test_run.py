"""`cloudrunner run` end to end: real clones, real containers, a real audit chain."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import docker
import docker.errors
import pytest

from cloudrunner.audit import verify_log
from tests.e2e.conftest import Deployment
from tests.support.git_repos import git

pytestmark = pytest.mark.docker


def test_guard_denies_a_destructive_command_and_allows_a_harmless_one(
    deployment: Deployment,
) -> None:
    denied = deployment.answer(
        deployment.event("beforeShellExecution", command="rm -rf /", cwd="/")
    )
    assert denied["permission"] == "deny"
    assert "recursive delete" in denied["user_message"]
    allowed = deployment.answer(
        deployment.event("beforeShellExecution", command="rm build.log", cwd="/")
    )
    assert allowed == {"permission": "allow"}
    # a command the matcher does not select runs no hook and is allowed
    assert deployment.answer(deployment.event("beforeShellExecution", command="ls")) == {
        "permission": "allow"
    }
    assert deployment.records()[-1]["hooks"] == 0
    hooks = [r for r in deployment.records() if r["kind"] == "hook"]
    assert [h["outcome"] for h in hooks] == ["ok", "ok"]
    assert hooks[0]["source"] == "project"
    assert hooks[0]["command"] == ".cursor/hooks/guard.sh"
    assert hooks[0]["attestation"]["isolation"] == deployment.isolation
    assert verify_log(deployment.audit_log).ok


def test_formatter_rewrites_the_edited_file_in_the_workspace(deployment: Deployment) -> None:
    target = deployment.workspace / "src" / "app.py"
    answer = deployment.answer(
        deployment.event(
            "afterFileEdit",
            file_path=str(target),
            edits=[{"old_string": "", "new_string": "x"}],
        )
    )
    assert answer == {}
    assert target.read_text() == 'def greet(name):\n    return f"hello {name}"\n'
    # the clone belongs to the hook uid, never root, so the hook could write it
    assert target.stat().st_uid == 10001


def test_stop_follow_ups_stop_at_the_loop_limit_across_processes(deployment: Deployment) -> None:
    answers = [
        deployment.answer(deployment.event("stop", status="completed", loop_count=n))
        for n in range(3)
    ]
    assert "open item" in answers[0]["followup_message"]
    assert "open item" in answers[1]["followup_message"]
    assert answers[2] == {}
    last = [r for r in deployment.records() if r["kind"] == "hook"][-1]
    assert "loop" in json.dumps(last["merge_fields"]) or "loop" in last["merge_use"]
    # another conversation has its own budget
    other = deployment.event("stop", status="completed", loop_count=0)
    other["conversation_id"] = "conv-2"
    assert "followup_message" in deployment.answer(other)


def test_enterprise_block_skips_project_hooks(deployment: Deployment) -> None:
    # give the project a prompt hook that would leave a trace if it ran
    deployment.answer(deployment.event("stop", status="aborted", loop_count=0))  # clones
    hooks_file = deployment.workspace / ".cursor" / "hooks.json"
    config = json.loads(hooks_file.read_text())
    config["hooks"]["beforeSubmitPrompt"] = [{"command": "touch ran-project-prompt-hook"}]
    hooks_file.write_text(json.dumps(config))
    blocked = deployment.answer(
        deployment.event("beforeSubmitPrompt", prompt="key AKIAABCDEFGHIJKLMNOP")
    )
    assert blocked["continue"] is False
    assert "credential" in blocked["user_message"]
    assert not (deployment.workspace / "ran-project-prompt-hook").exists()
    hooks = [r for r in deployment.records() if r["kind"] == "hook"]
    assert [(h["source"], h["outcome"]) for h in hooks[-2:]] == [
        ("enterprise", "ok"),
        ("project", "skipped"),
    ]
    # a harmless prompt passes both tiers, and the project hook runs
    assert deployment.answer(deployment.event("beforeSubmitPrompt", prompt="hi")) == {
        "continue": True
    }
    assert (deployment.workspace / "ran-project-prompt-hook").exists()


def test_user_and_prompt_hooks_are_reported_not_run(deployment: Deployment) -> None:
    deployment.answer(deployment.event("afterAgentResponse", text="done"))
    skipped = [r for r in deployment.records() if r["kind"] == "skipped"]
    reasons = " | ".join(r["reason"] for r in skipped)
    assert "user hooks are not loaded in the cloud profile" in reasons
    assert "prompt" in reasons
    # reported once per file version, not on every event
    deployment.answer(deployment.event("afterAgentResponse", text="again"))
    assert len([r for r in deployment.records() if r["kind"] == "skipped"]) == len(skipped)


@pytest.mark.parametrize(
    ("payload", "args", "expected"),
    [
        (b"not json", (), "not a JSON document"),
        (b"[1, 2]", (), "must be a JSON object"),
        (b'{"conversation_id": "c"}', (), "no hook_event_name"),
        (b'{"hook_event_name": "beforeShellExecution", "command": 5}', (), "invalid"),
        (b'{"hook_event_name": "beforeShellExecution"}', ("--event", "stop"), "hook_event_name"),
        (b'{"hook_event_name": "beforeShellExec"}', (), "unknown hook event"),
        (b'{"hook_event_name": "sessionStart"}', (), "not available in the cloud profile"),
    ],
)
def test_unusable_payloads_exit_non_zero_with_one_line_and_a_refused_record(
    deployment: Deployment, payload: bytes, args: tuple[str, ...], expected: str
) -> None:
    proc = deployment.run(payload, *args)
    stderr = proc.stderr.decode()
    assert proc.returncode == 2
    assert proc.stdout == b""
    assert expected in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert "Traceback" not in stderr
    (record,) = deployment.records()
    assert record["kind"] == "refused"
    assert expected in record["reason"]
    assert verify_log(deployment.audit_log).ok


def test_a_payload_over_the_cap_is_refused(deployment: Deployment) -> None:
    payload = deployment.event("afterAgentResponse", text="x" * 5000)
    proc = deployment.run(payload, env={"CLOUDRUNNER_MAX_PAYLOAD_BYTES": "2048"})
    assert proc.returncode == 2
    assert "over the 2048-byte cap" in proc.stderr.decode()


@pytest.mark.parametrize(
    ("repo", "ref", "expected"),
    [
        ("file:///nonexistent/repo.git", "main", "does not exist"),
        (None, "no-such-branch", "no-such-branch"),
    ],
)
def test_missing_repository_or_ref_is_a_clear_refusal(
    deployment: Deployment, repo: str | None, ref: str, expected: str
) -> None:
    flags = deployment.flags()
    flags[flags.index("--repo") + 1] = repo or deployment.origin.as_uri()
    flags[flags.index("--ref") + 1] = ref
    proc = deployment.run(deployment.event("stop", status="completed"), flags=flags)
    assert proc.returncode == 2
    stderr = proc.stderr.decode()
    assert expected in stderr
    assert "Traceback" not in stderr
    assert deployment.records()[-1]["kind"] == "refused"


def test_a_clone_that_needs_credentials_it_lacks(deployment: Deployment, tmp_path: Path) -> None:
    from tests.support.git_http import serve_git

    secret = "tok-9a8b7c6d5e"
    with serve_git(deployment.origin.parent, "x-access-token", secret) as server:
        flags = deployment.flags()
        flags[flags.index("--repo") + 1] = server.url(deployment.origin.name)
        env = {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        proc = deployment.run(deployment.event("stop", status="completed"), flags=flags, env=env)
        assert proc.returncode == 2
        assert "credential" in proc.stderr.decode().lower()
        # with the token in the configured variable the same clone works, and leaks nowhere
        proc = deployment.run(
            deployment.event("stop", status="completed"),
            flags=flags,
            env={**env, "CLOUDRUNNER_GIT_TOKEN": secret},
        )
        assert proc.returncode == 0, proc.stderr.decode()
    for path in [*deployment.workspace.rglob("*"), *deployment.state.rglob("*")]:
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_a_hooks_file_broken_between_events_disables_only_its_source(
    deployment: Deployment,
) -> None:
    prompt = deployment.event("beforeSubmitPrompt", prompt="AKIAABCDEFGHIJKLMNOP")
    assert deployment.answer(prompt)["continue"] is False
    (deployment.workspace / ".cursor" / "hooks.json").write_text('{"version": 1, "hooks": {')
    # the enterprise hook still blocks; the project's broken file is reported
    assert deployment.answer(prompt)["continue"] is False
    denied = deployment.event("beforeShellExecution", command="rm -rf /")
    assert deployment.answer(denied) == {"permission": "allow"}  # no project guard now
    broken = [
        r
        for r in deployment.records()
        if r["kind"] == "skipped" and r["source"] == "project" and r["source_status"] == "broken"
    ]
    assert "json" in broken[-1]["reason"].lower()
    assert len(broken) >= 2  # reported on every event while broken
    assert verify_log(deployment.audit_log).ok


def test_a_closed_gate_answers_neutrally_and_runs_nothing(deployment: Deployment) -> None:
    from cloudrunner.event import gate

    deployment.answer(deployment.event("stop", status="aborted"))  # clone first
    gate.set_mode(deployment.state, gate.GateMode.CLOSED)
    denied = deployment.event("beforeShellExecution", command="rm -rf /")
    assert deployment.answer(denied) == {"permission": "allow"}
    assert deployment.records()[-1]["kind"] == "gated"
    gate.set_mode(deployment.state, gate.GateMode.AUTO)
    assert deployment.answer(denied)["permission"] == "deny"


def test_a_read_only_workspace_is_gated_until_it_becomes_writable(
    deployment: Deployment, tmp_path: Path
) -> None:
    from tests.support.mounts import mount, read_only_view

    deployment.answer(deployment.event("stop", status="aborted"))  # clone first
    view = tmp_path / "ro-view"
    with read_only_view(deployment.workspace, view):
        flags = deployment.flags()
        del flags[flags.index("--repo") : flags.index("--ref") + 2]
        flags[flags.index("--workspace") + 1] = str(view)
        payload = deployment.event("beforeShellExecution", command="rm -rf /")
        payload["workspace_roots"] = [str(view)]
        proc = deployment.run(payload, flags=flags)
        assert proc.returncode == 0, proc.stderr.decode()
        assert json.loads(proc.stdout) == {"permission": "allow"}
        gated = deployment.records()[-1]
        assert gated["kind"] == "gated"
        assert "not writable" in gated["reason"]
        mount("-o", "remount,bind,rw", str(view))
        proc = deployment.run(payload, flags=flags)
        assert json.loads(proc.stdout)["permission"] == "deny"


def test_existing_torn_audit_record_is_acknowledged_and_the_chain_continues(
    deployment: Deployment,
) -> None:
    deployment.answer(deployment.event("stop", status="aborted"))
    # what a writer killed in the middle of a record leaves behind
    with deployment.audit_log.open("ab") as fh:
        fh.write(b'{"kind": "hook", "seq": 99, "half a rec')
    proc = deployment.run(deployment.event("stop", status="aborted"))
    assert proc.returncode == 0
    assert "interrupted mid-record" in proc.stderr.decode()
    json.loads(proc.stdout)
    report = verify_log(deployment.audit_log)
    assert report.ok, report.problems
    assert len(report.torn) == 1
    kinds = [r["kind"] for r in deployment.records()]
    assert kinds.count("torn_record") == 1
    assert kinds.index("torn_record") < len(kinds) - 1


def test_config_init_and_show(tmp_path: Path, deployment: Deployment) -> None:
    import sys

    cfg = tmp_path / "worker.toml"
    run = [sys.executable, "-m", "cloudrunner", "config"]
    env = deployment.base_env()
    assert subprocess.run([*run, "init", str(cfg)], env=env, check=False).returncode == 0
    cfg.write_text(cfg.read_text().replace('profile = "cloud"', 'profile = "desktop"'))
    shown = subprocess.run(
        [*run, "show", "--config", str(cfg), "--runtime", "runsc"],
        env={**env, "CLOUDRUNNER_IMAGE": "img:1"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert 'profile = "desktop"' in shown
    assert 'runtime = "runsc"' in shown
    assert 'image = "img:1"' in shown


def test_same_commit_is_recorded_for_every_hook(deployment: Deployment) -> None:
    deployment.answer(deployment.event("beforeShellExecution", command="rm -rf /"))
    head = git(deployment.origin, "rev-parse", "main")
    hook = next(r for r in deployment.records() if r["kind"] == "hook")
    assert hook["commit"] == head


def test_stdout_holds_only_the_answer_even_with_debug_logging(deployment: Deployment) -> None:
    proc = deployment.run(
        deployment.event("beforeShellExecution", command="rm -rf /"),
        env={"CLOUDRUNNER_LOG_LEVEL": "debug"},
    )
    assert proc.returncode == 0, proc.stderr.decode()
    (line,) = proc.stdout.decode().splitlines()
    assert json.loads(line)["permission"] == "deny"


def test_payload_text_is_stored_only_as_a_digest(deployment: Deployment) -> None:
    prompt = "please refactor the billing module, codename BLUEHERON"
    deployment.answer(deployment.event("beforeSubmitPrompt", prompt=prompt))
    log = deployment.audit_log.read_text()
    assert "BLUEHERON" not in log
    decision = deployment.records()[-1]
    assert decision["payload"]["prompt"]["length"] == len(prompt)
    assert len(decision["payload"]["prompt"]["sha256"]) == 64


def test_desktop_session_start_env_reaches_later_hooks(deployment: Deployment) -> None:
    deployment.answer(deployment.event("afterAgentResponse", text="clone"))
    hooks_file = deployment.workspace / ".cursor" / "hooks.json"
    config = json.loads(hooks_file.read_text())
    config["hooks"]["sessionStart"] = [
        {"command": """echo '{"env": {"DEMO_FLAG": "from-session-start"}}'"""}
    ]
    config["hooks"]["postToolUse"] = [
        {"command": """jq -n --arg v "$DEMO_FLAG" '{additional_context: $v}'"""}
    ]
    hooks_file.write_text(json.dumps(config))
    start = deployment.event("sessionStart", session_id="s1", is_background_agent=True)
    assert deployment.answer(start, "--profile", "desktop")["env"] == {
        "DEMO_FLAG": "from-session-start"
    }
    tool = deployment.event("postToolUse", tool_name="Shell", tool_input={}, tool_output="")
    assert deployment.answer(tool, "--profile", "desktop") == {
        "additional_context": "from-session-start"
    }


def test_team_hooks_run_in_their_read_only_directory(
    deployment: Deployment, tmp_path: Path
) -> None:
    team = tmp_path / "team"
    team.mkdir()
    team.chmod(0o755)
    (team / "hooks.json").write_text(
        json.dumps(
            {
                "version": 1,
                "hooks": {
                    "postToolUse": [
                        {
                            "command": "touch here 2>/dev/null && w=yes || w=no; "
                            """jq -n --arg d "$PWD" --arg w "$w" """
                            """'{additional_context: ($d + " writable=" + $w)}'"""
                        }
                    ]
                },
            }
        )
    )
    tool = deployment.event("postToolUse", tool_name="Shell", tool_input={}, tool_output="")
    answer = deployment.answer(tool, "--team-hooks", str(team))
    assert answer == {"additional_context": f"{team} writable=no"}
    assert not (team / "here").exists()
    hook = [r for r in deployment.records() if r["kind"] == "hook"][-1]
    assert hook["source"] == "team"


def test_a_run_reaps_sandboxes_left_by_a_worker_process_that_is_gone(
    deployment: Deployment, docker_client: docker.DockerClient, runtime_image: str
) -> None:
    import socket

    from cloudrunner.sandbox.base import HOST_LABEL, PID_LABEL, PROCESS_START_LABEL, WORKER_LABEL

    orphan = docker_client.containers.create(
        runtime_image,
        ["sleep", "600"],
        labels={
            WORKER_LABEL: deployment.worker_id,
            HOST_LABEL: socket.gethostname(),
            PID_LABEL: "999999",
            PROCESS_START_LABEL: "0",
        },
    )
    orphan.start()
    deployment.answer(deployment.event("beforeShellExecution", command="rm -rf /"))
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(orphan.id)
    reaped = [r for r in deployment.records() if r["kind"] == "reaped"]
    assert [r["container_id"][:12] for r in reaped] == [orphan.id[:12]]


def test_run_with_a_terminal_on_stdin_says_to_pipe_the_event(deployment: Deployment) -> None:
    import os
    import pty
    import sys

    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "cloudrunner", "run", *deployment.flags()],
            stdin=follower,
            capture_output=True,
            env=deployment.base_env(),
            timeout=60,
            check=False,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 2
    assert "pipe it in" in proc.stderr.decode()
