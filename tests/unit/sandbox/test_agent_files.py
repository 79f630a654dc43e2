"""Staging the session agent's files in the state directory (no Docker)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from cloudrunner.sandbox import agent_files, container_plan
from cloudrunner.sandbox.base import SandboxConfigError

PACKAGE_SANDBOX = Path(agent_files.__file__).resolve().parent


def test_stage_copies_the_agent_files_world_readable(tmp_path: Path) -> None:
    staged = agent_files.stage(tmp_path / "state")
    assert staged.parent == (tmp_path / "state" / agent_files.STAGE_DIR).resolve()
    for name in agent_files.AGENT_FILES:
        copy = staged / name
        assert copy.read_bytes() == (PACKAGE_SANDBOX / name).read_bytes()
        assert stat.S_IMODE(copy.stat().st_mode) == 0o644
    assert stat.S_IMODE(staged.stat().st_mode) == 0o755
    assert not [p for p in staged.iterdir() if p.name.startswith(".")]  # no temporaries left


def test_stage_is_idempotent_and_keyed_by_content(tmp_path: Path) -> None:
    first = agent_files.stage(tmp_path)
    assert agent_files.stage(tmp_path) == first
    other = tmp_path / "other-version"
    other.mkdir()
    for name in agent_files.AGENT_FILES:
        (other / name).write_text(f"# {name} of another version\n")
    second = agent_files.stage(tmp_path, source_dir=other)
    assert second != first
    assert (second / "agent.py").read_text() == "# agent.py of another version\n"
    assert (first / "agent.py").read_bytes() == (PACKAGE_SANDBOX / "agent.py").read_bytes()


def test_stage_resolves_symlinks_in_the_state_dir(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert agent_files.stage(tmp_path / "link").is_relative_to(real)


def test_an_unwritable_state_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file, not a directory")
    with pytest.raises(SandboxConfigError, match="cannot stage the session agent's files"):
        agent_files.stage(blocker)


def test_agent_mounts_come_from_the_staged_directory(tmp_path: Path) -> None:
    staged = agent_files.stage(tmp_path)
    mounts = container_plan.agent_mounts(staged)
    assert {m.source for m in mounts} == {str(staged / n) for n in agent_files.AGENT_FILES}
    assert all(m.read_only and m.target.startswith(container_plan.AGENT_ROOT) for m in mounts)
    default = container_plan.agent_mounts()
    assert {m.source for m in default} == {
        str(PACKAGE_SANDBOX / n) for n in agent_files.AGENT_FILES
    }
