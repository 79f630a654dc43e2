"""The operator's allowlist of daemon variables passed to hooks (`[hook_env]`), through a
real `cloudrunner serve` and both clients, hooks in real containers: what is named passes,
a credential-looking name only by its exact name, the daemon's own settings never; each
hook record names them, and no value reaches the audit log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.ci import needs_root
from tests.support.daemon_process import daemon_process
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import committed_repo
from tests.support.two_clients import missing_client, shell_event_through_both

pytestmark = [pytest.mark.docker, needs_root("needs root to own the workspace as root")]

DAEMON_ENV = {
    "CI": "true",
    "DEPLOY_ENV": "staging",
    "DEPLOY_TOKEN": "deploy-token-value-1",
    "CORP_API_TOKEN": "corp-token-value-2",
    "UNLISTED": "unlisted-value-3",
    "CLOUDRUNNER_GIT_TOKEN": "git-token-value-4",
}
CONFIG = """
[hook_env]
project = ["CI", "DEPLOY_*", "CORP_API_TOKEN", "ABSENT"]
"""
# a guard that behaves on the operator's variables, as on the VM, and says what it saw
GUARD = """#!/bin/sh
seen="CI=${CI:-} DEPLOY_ENV=${DEPLOY_ENV:-} DEPLOY_TOKEN=${DEPLOY_TOKEN:-unset}"
seen="$seen CORP_API_TOKEN=${CORP_API_TOKEN:+set} UNLISTED=${UNLISTED:-unset}"
seen="$seen CLOUDRUNNER_GIT_TOKEN=${CLOUDRUNNER_GIT_TOKEN:-unset}"
if [ "$CI" = true ]; then
  printf '{"permission": "deny", "agent_message": "%s"}\\n' "$seen"
else
  echo '{"permission": "allow"}'
fi
"""


@pytest.mark.parametrize("isolation", ["session", "hook"])
def test_named_variables_pass_and_the_record_names_them(
    tmp_path: Path, docker_tracker: DockerTracker, isolation: str
) -> None:
    why = missing_client()
    if why:
        pytest.fail(why, pytrace=False)
    tmp_path.chmod(0o755)
    ws = tmp_path / "repo"
    (ws / ".cursor").mkdir(parents=True)
    (ws / ".cursor" / "guard.sh").write_text(GUARD)
    (ws / ".cursor" / "guard.sh").chmod(0o755)
    hooks = {"version": 1, "hooks": {"beforeShellExecution": [{"command": ".cursor/guard.sh"}]}}
    (ws / ".cursor" / "hooks.json").write_text(json.dumps(hooks))
    committed_repo(ws, "a guard on CI")
    config = tmp_path / "cloudrunner.toml"
    config.write_text(CONFIG)
    state = tmp_path / "state"
    daemon = daemon_process(
        ["--config", str(config), "--workspace", str(ws), "--state-dir", str(state),
         "--enterprise-hooks", str(tmp_path / "none.json"), "--isolation", isolation],
        state=state, worker_id=docker_tracker.worker_id, env=DAEMON_ENV,
    ).start()  # fmt: skip
    outcome = shell_event_through_both(daemon, ws)
    assert outcome.code == 0, outcome
    answer = json.loads(outcome.stdout)
    assert answer == {
        "permission": "deny",
        "agent_message": "CI=true DEPLOY_ENV=staging DEPLOY_TOKEN=unset CORP_API_TOKEN=set "
        "UNLISTED=unset CLOUDRUNNER_GIT_TOKEN=unset",
    }
    log = (state / "audit.log").read_text()
    hooks = [r for r in map(json.loads, log.splitlines()) if r["kind"] == "hook"]
    assert len(hooks) == 2
    for hook in hooks:
        passed = hook["passed_env"]
        assert passed["passed"] == ["CI", "CORP_API_TOKEN", "DEPLOY_ENV"]
        (refused,) = passed["refused"]
        assert refused["name"] == "DEPLOY_TOKEN" and "exact name" in refused["reason"]
        assert passed["missing"] == ["ABSENT"]
    # by name, never by value
    for value in ("deploy-token-value-1", "corp-token-value-2", "git-token-value-4"):
        assert value not in log
