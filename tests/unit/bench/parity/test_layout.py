"""Laying a repository out: the layout step, symlinks into the author's home, the snapshot."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.parity.cases import Repository
from bench.parity.layout import (
    LayoutError,
    in_repo,
    lay_out,
    plan_for,
    resolve_symlinks,
    run_shell,
)


def repository(name: str, layout: str = "as committed") -> Repository:
    return Repository(name, name.replace("__", "/"), "a" * 40, "MIT", layout, ("bash",), ())


def test_the_plan_is_the_known_step_or_as_committed_and_nothing_is_guessed() -> None:
    assert plan_for(repository("x__y")).steps == ()
    assert plan_for(repository("vburb__code-configs", "copy it")).steps == (
        "cp -a templates/.cursor .cursor",
    )
    assert plan_for(
        repository("yu-iskw__secure-coding-agent-config-examples", "x")
    ).resolve_symlinks
    with pytest.raises(LayoutError, match=r"no layout step known for new__repo.*run the installer"):
        plan_for(repository("new__repo", "run the installer"))


def test_an_absolute_symlink_target_is_found_by_its_longest_tail_inside_the_repo(
    tmp_path: Path,
) -> None:
    (tmp_path / "cursor" / "hooks").mkdir(parents=True)
    (tmp_path / "cursor" / "hooks" / "g.sh").write_text("#!/bin/sh\n")
    assert in_repo("/Users/a/src/cfg/cursor/hooks/g.sh", tmp_path) == tmp_path / "cursor/hooks/g.sh"
    assert in_repo("/Users/a/src/cfg/other/g.sh", tmp_path) is None


def test_cursor_symlinks_become_copies_and_other_dangling_ones_are_dropped(tmp_path: Path) -> None:
    (tmp_path / "cursor" / "hooks").mkdir(parents=True)
    script = tmp_path / "cursor" / "hooks" / "g.sh"
    script.write_text("#!/bin/sh\necho '{}'\n")
    script.chmod(0o755)
    (tmp_path / "cursor" / "hooks.json").write_text('{"version": 1, "hooks": {}}')
    (tmp_path / ".cursor" / "hooks").mkdir(parents=True)
    (tmp_path / ".claude").mkdir()
    os.symlink("/Users/yu/cfg/cursor/hooks/g.sh", tmp_path / ".cursor/hooks/g.sh")
    os.symlink("/Users/yu/cfg/cursor/hooks.json", tmp_path / ".cursor/hooks.json")
    os.symlink("/Users/yu/cfg/claude/settings.json", tmp_path / ".claude/settings.json")
    os.symlink("g.sh", tmp_path / "cursor/hooks/relative.sh")  # relative: left alone
    done = resolve_symlinks(tmp_path)
    copied = tmp_path / ".cursor/hooks/g.sh"
    assert not copied.is_symlink() and copied.read_text() == script.read_text()
    assert os.access(copied, os.X_OK)  # the mode came along
    assert (tmp_path / ".cursor/hooks.json").read_text().startswith('{"version"')
    assert not os.path.lexists(tmp_path / ".claude/settings.json")
    assert (tmp_path / "cursor/hooks/relative.sh").is_symlink()
    assert ".claude/settings.json: dangling, dropped" in done


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / ".cursor" / "hooks").mkdir(parents=True)
    (tree / ".gitignore").write_text(".cursor/\n")
    (tree / ".cursor" / "hooks.json").write_text('{"version": 1, "hooks": {}}\n')
    run = tree / ".cursor" / "hooks" / "run.sh"
    run.write_text("#!/bin/sh\n")
    run.chmod(0o755)
    plain = tree / ".cursor" / "hooks" / "plain.sh"
    plain.write_text("#!/bin/sh\n")
    plain.chmod(0o644)
    return tree


def test_a_layout_keeps_modes_commits_ignored_files_and_leaves_home_empty(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "work" / "repo"
    root.parent.mkdir()
    lay_out(repository("x__y"), tree, root, home)
    tracked = subprocess.run(
        ["git", "ls-files", "-s"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert "100755" in next(line for line in tracked.splitlines() if "run.sh" in line)
    assert "100644" in next(line for line in tracked.splitlines() if "plain.sh" in line)
    assert ".cursor/hooks.json" in tracked  # ignored by the repo's .gitignore, added anyway
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True
    )
    assert status.stdout == ""
    assert list(home.iterdir()) == []
    assert (tree / ".cursor" / "hooks.json").exists()  # the cache is never changed


def test_a_failing_step_names_the_command_and_its_last_stderr_line(tmp_path: Path) -> None:
    with pytest.raises(LayoutError, match=r"`ls /nonexistent-parity` exited 2 .*No such file"):
        run_shell("ls /nonexistent-parity", tmp_path, tmp_path)


def test_a_post_check_counts_its_output_whatever_its_exit_status(tmp_path: Path) -> None:
    out = run_shell("echo 0; exit 1", tmp_path, tmp_path, check=False)
    assert out == "0\n"
