from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudrunner.sandbox.base import SandboxConfigError, SandboxLabels, SandboxSpec
from cloudrunner.sandbox.container_plan import (
    Mount,
    cwd_problem,
    data_mounts,
    hook_identity,
    process_start,
    sandbox_labels,
    validate_spec,
)
from cloudrunner.sandbox.limits import FALLBACK_HOOK_UID, SandboxProfile
from tests.support.ci import needs_root

LABELS = SandboxLabels("w1", "s1", "project")


def spec_for(workspace: Path, **profile: object) -> SandboxSpec:
    return SandboxSpec(workspace, LABELS, SandboxProfile.model_validate(profile))


def test_hooks_run_as_the_workspace_owner(tmp_path: Path) -> None:
    st = tmp_path.stat()
    expected_uid = st.st_uid or FALLBACK_HOOK_UID
    expected_gid = st.st_gid or FALLBACK_HOOK_UID
    assert hook_identity(spec_for(tmp_path)) == (expected_uid, expected_gid)


@needs_root("needs root to chown")
def test_a_root_owned_workspace_gives_the_fixed_uid_and_others_their_owner(tmp_path: Path) -> None:
    os.chown(tmp_path, 0, 0)
    assert hook_identity(spec_for(tmp_path)) == (FALLBACK_HOOK_UID, FALLBACK_HOOK_UID)
    os.chown(tmp_path, 1234, 2345)
    assert hook_identity(spec_for(tmp_path)) == (1234, 2345)


def test_a_configured_user_wins(tmp_path: Path) -> None:
    assert hook_identity(spec_for(tmp_path, user=4242, group=4343)) == (4242, 4343)


def test_missing_or_relative_paths_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxConfigError, match="does not exist"):
        validate_spec(spec_for(tmp_path / "missing"))
    with pytest.raises(SandboxConfigError, match="not an absolute path"):
        validate_spec(spec_for(Path("relative")))
    spec = SandboxSpec(tmp_path, LABELS, config_dirs=(tmp_path / "nope",))
    with pytest.raises(SandboxConfigError, match="config directory"):
        validate_spec(spec)


def test_mounts_sit_at_host_paths_and_config_dirs_are_read_only(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    inner = ws / ".cursor"
    team = tmp_path / "team"
    for d in (inner, team):
        d.mkdir(parents=True)
    spec = SandboxSpec(ws, LABELS, SandboxProfile(), config_dirs=(team, inner, team))
    mounts = data_mounts(spec)
    assert mounts == (Mount(str(ws), str(ws), False), Mount(str(team), str(team), True))
    ro = data_mounts(SandboxSpec(ws, LABELS, SandboxProfile(workspace_mode="ro")))
    assert ro[0].read_only


def test_working_directory_must_be_visible_in_the_sandbox(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    mounts = (Mount(str(tmp_path), str(tmp_path), False),)
    assert cwd_problem(str(tmp_path / "sub"), mounts) == ""
    assert cwd_problem("/tmp", mounts) == ""
    assert "does not exist" in cwd_problem(str(tmp_path / "gone"), mounts)
    assert "outside the workspace" in cwd_problem("/etc", mounts)
    assert "absolute" in cwd_problem("sub", mounts)


def test_labels_name_worker_session_source_and_the_creating_process(tmp_path: Path) -> None:
    labels = sandbox_labels(spec_for(tmp_path), "hook")
    assert labels["cloudrunner.worker"] == "w1"
    assert labels["cloudrunner.session"] == "s1"
    assert labels["cloudrunner.source"] == "project"
    assert labels["cloudrunner.isolation"] == "hook"
    assert labels["cloudrunner.worker-pid"] == str(os.getpid())
    assert labels["cloudrunner.worker-start"] == process_start(os.getpid())


def test_home_and_transcript_are_mounted_rw_and_ro(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    file = tmp_path / "t.jsonl"
    file.write_text("{}\n")
    spec = SandboxSpec(
        workspace=ws, labels=SandboxLabels("w", "s", "project"), home=home, transcript=file
    )
    mounts = data_mounts(spec)
    assert Mount(str(home), "/home/hook", False) in mounts  # a neutral path, never the host's
    assert Mount(str(file), str(file), True) in mounts
    # a transcript inside the workspace is visible through it: no second mount
    inner = ws / "t.jsonl"
    inner.write_text("{}\n")
    spec = SandboxSpec(workspace=ws, labels=SandboxLabels("w", "s", "project"), transcript=inner)
    assert data_mounts(spec) == (Mount(str(ws), str(ws), False),)
