"""Operator policy through `cloudrunner run`, real containers: managed-only mode and pinned
project hooks (the demo repository's failClosed guard denies `rm -rf /`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Deployment

pytestmark = pytest.mark.docker

DESTRUCTIVE = {"command": "rm -rf /", "cwd": "{ws}"}


def shell(deployment: Deployment) -> dict[str, object]:
    fields = {k: v.format(ws=deployment.workspace) for k, v in DESTRUCTIVE.items()}
    return deployment.event("beforeShellExecution", **fields)


def with_config(deployment: Deployment, text: str) -> list[str]:
    config = deployment.root / "config.toml"
    config.write_text(text)
    return [*deployment.flags(), "--config", str(config)]


def digest_of(workspace: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "hooks", "digest", str(workspace)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return proc.stdout.strip()


def answer(deployment: Deployment, flags: list[str]) -> dict[str, object]:
    import json

    proc = deployment.run(shell(deployment), flags=flags)
    assert proc.returncode == 0, proc.stderr.decode()
    value = json.loads(proc.stdout)
    assert isinstance(value, dict)
    return value


def test_managed_only_mode_skips_project_hooks_with_a_recorded_reason(
    deployment: Deployment,
) -> None:
    assert deployment.answer(shell(deployment))["permission"] == "deny"  # the guard runs
    flags = with_config(deployment, '[sources]\nallowed = ["enterprise", "team"]\n')
    assert answer(deployment, flags)["permission"] == "allow"
    skipped = [r for r in deployment.records() if r["kind"] == "skipped"]
    assert any(r["source"] == "project" and "sources.allowed" in r["reason"] for r in skipped), (
        skipped
    )
    last = [r for r in deployment.records() if r["kind"] == "decision"][-1]
    assert last["hooks"] == 0


def test_pinned_project_hooks_run_when_approved_and_stop_when_a_script_changes(
    deployment: Deployment,
) -> None:
    deployment.answer(deployment.event("stop", status="completed", loop_count=0))  # clones
    digest = digest_of(deployment.workspace)
    flags = with_config(deployment, f'[sources]\nproject_digests = ["{digest}"]\n')
    assert answer(deployment, flags)["permission"] == "deny"
    guard = deployment.workspace / ".cursor" / "hooks" / "guard.sh"
    guard.write_text(guard.read_text() + "\n# edited after approval\n")
    assert answer(deployment, flags)["permission"] == "allow"
    refusals = [
        r for r in deployment.records()
        if r["kind"] == "skipped" and r.get("diagnostic", {}).get("code") == "project-not-approved"
    ]  # fmt: skip
    assert refusals, "the unapproved digest is recorded"
    assert digest_of(deployment.workspace) in refusals[-1]["reason"]
    assert digest not in refusals[-1]["reason"]
