"""A hook that runs pnpm in a repository whose package.json pins (`packageManager`) a pnpm
version the runtime image lacks: pnpm tries to download it and the sandbox has no network.
It must fail at once, as on an offline machine, and say why, not hang to the hook's timeout
(pnpm retried for about 70 s). Through a real `cloudrunner serve` and both clients, in the
runtime image built from images/hook-runtime (CLOUDRUNNER_TEST_IMAGE names another build)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import RUNTIME_IMAGE
from tests.support.ci import needs_root
from tests.support.daemon_process import daemon_process
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import committed_repo
from tests.support.two_clients import missing_client, shell_event_through_both

pytestmark = [pytest.mark.docker, needs_root("needs root to own the workspace as root")]

#: well under the ~70 s pnpm's retries took without a network: a hang reads as a timeout
TIMEOUT_S = 20
HOOKS = {
    "version": 1,
    "hooks": {
        "beforeShellExecution": [
            {"command": "pnpm exec true", "timeout": TIMEOUT_S, "failClosed": True},
        ]
    },
}


def test_a_pnpm_pin_the_image_lacks_fails_at_once_and_names_the_cause(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    why = missing_client()
    if why:
        pytest.fail(why, pytrace=False)
    tmp_path.chmod(0o755)
    ws = tmp_path / "repo"
    (ws / ".cursor").mkdir(parents=True)
    (ws / ".cursor" / "hooks.json").write_text(json.dumps(HOOKS))
    pin = {"name": "pinned", "version": "1.0.0", "packageManager": "pnpm@8.15.9"}
    (ws / "package.json").write_text(json.dumps(pin))
    committed_repo(ws, "a pnpm pin")
    state = tmp_path / "state"
    daemon = daemon_process(
        ["--workspace", str(ws), "--state-dir", str(state), "--enterprise-hooks",
         str(tmp_path / "none.json"), "--isolation", "session", "--image", RUNTIME_IMAGE],
        state=state, worker_id=docker_tracker.worker_id,
    ).start()  # fmt: skip
    outcome = shell_event_through_both(daemon, ws)
    assert outcome.code == 0, outcome
    answer = json.loads(outcome.stdout)
    # failClosed: the failure blocks, and the block says what the sandbox lacks
    assert answer["permission"] == "deny"
    assert "packageManager" in answer["agent_message"], answer
    lines = (state / "audit.log").read_text().splitlines()
    hooks = [r for r in map(json.loads, lines) if r["kind"] == "hook"]
    assert [h["outcome"] for h in hooks] == ["error", "error"], [h["reason"] for h in hooks]
    for hook in hooks:
        cause = hook["sandbox_cause"]
        assert cause["kind"] == "no_network" and cause["subject"] == "registry.npmjs.org"
        assert "fetch failed" in cause["line"]
