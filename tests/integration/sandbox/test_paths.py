"""Workspace paths the engine must not parse: ':', ',', '=', spaces and unicode reach it as
structured mounts, in both isolation modes and both runtimes, and the read-back attests the
exact path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudrunner.sandbox import ExecRequest, SandboxLabels, SandboxProfile, SandboxSpec
from cloudrunner.sandbox.base import SandboxConfigError
from cloudrunner.sandbox.container_plan import Mount, data_mounts
from tests.integration.sandbox.conftest import WORKSPACE_UID, SandboxFactory

pytestmark = pytest.mark.docker

#: names the old "src:dst:mode" volume strings (and --mount's CSV) would have split
AWKWARD = ["a:b", "x:ro", "c,d=e", "with space", "ünïcødé ✓", "tail:"]


def _workspace(base: Path, name: str) -> Path:
    ws = base / name
    ws.mkdir()
    (ws / "README").write_text("workspace file\n")
    if os.geteuid() == 0:
        os.chown(ws, WORKSPACE_UID, WORKSPACE_UID)
    return ws


@pytest.mark.parametrize("name", AWKWARD)
def test_a_hook_runs_in_a_workspace_whose_path_the_engine_would_split(
    make_sandbox: SandboxFactory,
    isolation: str,
    runtime: str,
    tmp_path: Path,
    name: str,
) -> None:
    ws = _workspace(tmp_path, name)
    sandbox = make_sandbox(isolation, runtime, workspace_path=ws)
    result = sandbox.run(
        ExecRequest('pwd; cat README; echo hook > "$PWD/written"', str(ws), timeout_s=60)
    )
    assert result.outcome == "ok", result.message
    assert result.stdout.decode() == f"{ws}\nworkspace file\n"
    assert (ws / "written").read_text() == "hook\n"
    assert {"source": str(ws), "target": str(ws), "mode": "rw"} in result.attestation["mounts"]


def test_a_config_directory_with_a_colon_is_mounted_read_only_at_its_path(
    make_sandbox: SandboxFactory, tmp_path: Path, workspace: Path
) -> None:
    team = tmp_path / "team:ro,rw"
    team.mkdir()
    team.chmod(0o755)
    (team / "policy").write_text("team policy\n")
    sandbox = make_sandbox("hook", config_dirs=(team,), source="team")
    result = sandbox.run(
        ExecRequest(
            "cat policy; touch x 2>/dev/null && echo rw || echo ro", str(team), timeout_s=60
        )
    )
    assert result.outcome == "ok", result.message
    assert result.stdout.decode() == "team policy\nro\n"
    assert {"source": str(team), "target": str(team), "mode": "ro"} in result.attestation["mounts"]


def test_a_workspace_given_through_a_symlink_is_refused_not_followed(
    make_sandbox: SandboxFactory, tmp_path: Path, workspace: Path
) -> None:
    """The engine follows a link in a mount source to wherever it leads at that moment;
    the sandbox mounts only a resolved directory (the worker resolves it once)."""
    link = tmp_path / "link"
    link.symlink_to(workspace)
    with pytest.raises(SandboxConfigError, match="not its own real path"):
        make_sandbox("hook", workspace_path=link)
    with pytest.raises(SandboxConfigError, match="not its own real path"):
        make_sandbox("session", config_dirs=(link,))
    spec_mounts = data_mounts(
        SandboxSpec(workspace, SandboxLabels("w", "s", "project"), SandboxProfile())
    )
    assert spec_mounts[0] == Mount(str(workspace), str(workspace), False)


def test_a_missing_workspace_is_refused_before_the_engine_invents_it(
    make_sandbox: SandboxFactory, tmp_path: Path
) -> None:
    with pytest.raises(SandboxConfigError, match="does not exist or is not a directory"):
        make_sandbox("hook", workspace_path=tmp_path / "gone:rw")
    assert not (tmp_path / "gone:rw").exists()
