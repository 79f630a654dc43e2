"""A hook acts on the checkout with its owner's rights, as the agent's user does on the VM:
`chmod +x` a tracked script, the owner of a file it makes, git in the checkout. Where root
owns the directory but the agent's user owns the checkout in it, hooks run as that user;
where root owns it all, hooks run as the unprivileged uid (never root), and a mode change of
one of root's files is recorded as the sandbox's cause, not taken for the hook's verdict.
Through a real `cloudrunner serve` and both clients, hooks in real containers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cloudrunner.sandbox.limits import FALLBACK_HOOK_UID
from tests.support.ci import needs_root
from tests.support.daemon_process import daemon_process
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import git, init_repo
from tests.support.two_clients import missing_client, shell_event_through_both

pytestmark = [pytest.mark.docker, needs_root("needs root to give the checkout to other uids")]

AGENT_USER = 1234
# the hook reports what it could do into .hook-view/ (git-ignored) and answers allow
HOOK = """#!/bin/sh
out="$CURSOR_PROJECT_DIR/.hook-view"
mkdir -p "$out"
id -u > "$out/uid"
chmod +x tool.sh; echo $? > "$out/chmod"
touch "$out/made"
git status --porcelain > "$out/status" 2> "$out/git-err"
echo '{"permission": "allow"}'
"""


def _checkout(base: Path, *, root_dir: bool, owner: int) -> Path:
    ws = base / "repo"
    (ws / ".cursor").mkdir(parents=True)
    (ws / ".cursor" / "view.sh").write_text(HOOK)
    (ws / ".cursor" / "view.sh").chmod(0o755)
    hooks = {"version": 1, "hooks": {"beforeShellExecution": [{"command": ".cursor/view.sh"}]}}
    (ws / ".cursor" / "hooks.json").write_text(json.dumps(hooks))
    (ws / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    (ws / "tool.sh").chmod(0o644)
    init_repo(ws)
    (ws / ".git" / "info" / "exclude").write_text(".hook-view/\n")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "a script without its x bit")
    for directory, dirs, files in os.walk(ws):
        for name in (directory, *(os.path.join(directory, n) for n in (*dirs, *files))):
            os.lchown(name, owner, owner)
    if root_dir:
        os.chown(ws, 0, 0)  # root made the directory, the agent's user cloned into it
        ws.chmod(0o755)
    return ws


@pytest.mark.parametrize(
    ("owner", "hook_uid"), [(AGENT_USER, AGENT_USER), (0, FALLBACK_HOOK_UID)],
    ids=["agent-user-checkout-in-a-root-directory", "root-checkout"],
)  # fmt: skip
def test_a_hook_changes_modes_and_makes_files_as_the_checkouts_owner(
    tmp_path: Path, docker_tracker: DockerTracker, owner: int, hook_uid: int
) -> None:
    why = missing_client()
    if why:
        pytest.fail(why, pytrace=False)
    tmp_path.chmod(0o755)
    ws = _checkout(tmp_path, root_dir=True, owner=owner)
    state = tmp_path / "state"
    daemon = daemon_process(
        ["--workspace", str(ws), "--state-dir", str(state), "--enterprise-hooks",
         str(tmp_path / "none.json"), "--isolation", "session"],
        state=state, worker_id=docker_tracker.worker_id,
    ).start()  # fmt: skip
    outcome = shell_event_through_both(daemon, ws)
    assert outcome.code == 0, outcome
    assert json.loads(outcome.stdout) == {"permission": "allow"}
    view = ws / ".hook-view"
    assert (view / "uid").read_text().strip() == str(hook_uid)
    assert (view / "git-err").read_text() == ""
    assert (view / "made").stat().st_uid == hook_uid
    records = [json.loads(line) for line in (state / "audit.log").read_text().splitlines()]
    hooks = [r for r in records if r["kind"] == "hook"]
    assert [h["outcome"] for h in hooks] == ["ok", "ok"]
    if owner == AGENT_USER:
        # the owner's rights: the mode change took, and git sees it as the agent's would
        assert (view / "chmod").read_text().strip() == "0"
        assert os.access(ws / "tool.sh", os.X_OK)
        assert (view / "status").read_text().split() == ["M", "tool.sh"]
        assert not [h for h in hooks if h.get("sandbox_cause")]
    else:
        # never root: root's file keeps its mode, and the record says why
        assert (view / "chmod").read_text().strip() == "1"
        assert (ws / "tool.sh").stat().st_mode & 0o111 == 0
        cause = hooks[-1]["sandbox_cause"]
        assert cause["kind"] == "not_owner" and cause["subject"] == "tool.sh", cause
        assert "never as root" in cause["message"]
