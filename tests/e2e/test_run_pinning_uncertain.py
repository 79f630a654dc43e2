"""The issue's three forms that ran an edited script under an approved digest, end to end
through `cloudrunner run` with real containers: a command whose targets its text cannot tell
(`cd scripts && ./x.sh`, `"${CURSOR_PROJECT_DIR:-.}"/scripts/x.sh`, `"$PWD"/scripts/x.sh`)
does not load on its command-line digest alone, even approved; covered by
`sources.project_digest_paths` it runs, and an edit of the script unapproves it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Deployment, cloned_deployment
from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker

DENY = json.dumps({"permission": "deny", "agent_message": "the approved script ran"})
FORMS = ["cd scripts && ./x.sh", '"${CURSOR_PROJECT_DIR:-.}"/scripts/x.sh',
         '"$PWD"/scripts/x.sh']  # fmt: skip


@pytest.fixture
def deployment(tmp_path: Path, docker_tracker: DockerTracker) -> Deployment:
    return cloned_deployment(tmp_path, docker_tracker.worker_id)


def _digest(ws: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudrunner", "hooks", "digest", "--config", "/dev/null",
         *extra, str(ws)], capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _ask(deployment: Deployment, config: Path) -> dict[str, Any]:
    event = deployment.event("beforeShellExecution", command="ls",
                             cwd=str(deployment.workspace))  # fmt: skip
    proc = deployment.run(event, flags=[*deployment.flags(), "--config", str(config)])
    assert proc.returncode == 0, proc.stderr.decode()
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


@pytest.mark.parametrize("command", FORMS)
def test_an_uncertain_form_runs_only_when_a_digest_path_covers_it(
    deployment: Deployment, command: str
) -> None:
    ws = deployment.workspace
    script = ws / "scripts" / "x.sh"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\ncat >/dev/null\necho '{DENY}'\n")
    script.chmod(0o755)
    hooks = {"version": 1, "hooks": {"beforeShellExecution": [{"command": command}]}}
    (ws / ".cursor" / "hooks.json").write_text(json.dumps(hooks))

    bare = _digest(ws)
    assert bare.returncode == 1 and bare.stdout == "", bare.stderr
    assert "/hooks/beforeShellExecution/0" in bare.stderr and "scripts/x.sh" in bare.stderr
    covered = _digest(ws, "--path", "scripts/**")
    assert covered.returncode == 0, covered.stderr
    digest = covered.stdout.strip()

    approved_only = deployment.root / "approved-only.toml"
    approved_only.write_text(f'[sources]\nproject_digests = ["{digest}"]\n')
    assert _ask(deployment, approved_only)["permission"] == "allow"  # not loaded
    codes = [r.get("diagnostic", {}).get("code") for r in deployment.records()]
    assert "project-digest-uncovered" in codes

    with_paths = deployment.root / "with-paths.toml"
    with_paths.write_text(f'[sources]\nproject_digests = ["{digest}"]\n'
                          'project_digest_paths = ["scripts/**"]\n')  # fmt: skip
    assert _ask(deployment, with_paths)["permission"] == "deny"  # the approved script ran
    script.write_text(script.read_text().replace("cat >/dev/null", "cat >/dev/null # edited"))
    assert _ask(deployment, with_paths)["permission"] == "allow"  # the edit is not approved
