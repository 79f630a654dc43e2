"""`head_commit` on real git repositories: every way git moves HEAD is seen on the next
call."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cloudrunner import workspace
from cloudrunner.memo import BoundedMemo
from tests.support.git_repos import git, init_repo


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    commit(repo, "a")
    return repo


def test_every_move_of_head_is_seen(repo: Path) -> None:
    ws = workspace.adopt(repo)
    first = git(repo, "rev-parse", "HEAD")
    assert workspace.head_commit(ws) == first
    second = commit(repo, "b")  # the loose ref is rewritten
    assert workspace.head_commit(ws) == second
    git(repo, "checkout", "-q", "--detach", first)  # HEAD itself names a commit
    assert workspace.head_commit(ws) == first
    git(repo, "checkout", "-q", "main")
    assert workspace.head_commit(ws) == second
    git(repo, "pack-refs", "--all")  # the loose ref goes, packed-refs holds it
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert workspace.head_commit(ws) == second
    git(repo, "update-ref", "refs/heads/main", first)  # a loose ref again, over the packed
    assert workspace.head_commit(ws) == first
    git(repo, "checkout", "-q", "-b", "other")
    third = commit(repo, "c")
    assert workspace.head_commit(ws) == third
    git(repo, "checkout", "-q", "main")
    assert workspace.head_commit(ws) == first


def test_a_subdirectory_uses_the_enclosing_repository(repo: Path) -> None:
    (repo / "pkg").mkdir()
    ws = workspace.adopt(repo / "pkg")
    assert workspace.head_commit(ws) == git(repo, "rev-parse", "HEAD")
    new = commit(repo, "b")
    assert workspace.head_commit(ws) == new


def test_an_unborn_branch_or_a_git_file_answers_the_known_commit(
    repo: Path, tmp_path: Path
) -> None:
    ws = workspace.adopt(repo)
    git(repo, "checkout", "-q", "--orphan", "nothing-yet")
    assert workspace.head_commit(ws) == ws.commit
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked), "main")
    assert (linked / ".git").is_file()
    other = workspace.adopt(linked)
    assert workspace.head_commit(other) == other.commit


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """HEAD is remembered however fresh its files (a daemon remembers it once they are two
    seconds old): what is tested is that the remembered answer never hides a change."""
    monkeypatch.setattr(workspace, "_RACY_NS", 0)
    monkeypatch.setattr(workspace, "_heads", BoundedMemo())


def _age(repo: Path) -> None:
    """Let the kernel's coarse clock tick, so the next change gets a newer change time."""
    time.sleep(0.03)


@pytest.mark.usefixtures("no_racy_window")
def test_a_remembered_head_still_sees_every_move(repo: Path) -> None:
    ws = workspace.adopt(repo)
    first = git(repo, "rev-parse", "HEAD")
    _age(repo)
    assert workspace.head_commit(ws) == first
    assert any(key[0] == str(repo / ".git") for key in workspace._heads)  # remembered
    second = commit(repo, "b")
    _age(repo)
    assert workspace.head_commit(ws) == second
    git(repo, "checkout", "-q", "--detach", first)
    _age(repo)
    assert workspace.head_commit(ws) == first
    git(repo, "checkout", "-q", "main")
    git(repo, "pack-refs", "--all")
    _age(repo)
    assert workspace.head_commit(ws) == second


@pytest.mark.usefixtures("no_racy_window")
def test_a_ref_rewritten_in_place_with_its_old_times_is_seen(repo: Path) -> None:
    """Same inode, same size, mtime put back: the change time still moves."""
    ws = workspace.adopt(repo)
    first = git(repo, "rev-parse", "HEAD")
    second = commit(repo, "b")
    _age(repo)
    assert workspace.head_commit(ws) == second
    ref = repo / ".git" / "refs" / "heads" / "main"
    before = ref.stat()
    with open(ref, "r+") as handle:
        handle.write(first + "\n")
    os.utime(ref, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert ref.stat().st_ino == before.st_ino and ref.stat().st_size == before.st_size
    assert workspace.head_commit(ws) == first


@pytest.mark.usefixtures("no_racy_window")
def test_a_ref_swapped_for_a_symlink_out_of_the_repository_is_not_read(
    repo: Path, tmp_path: Path
) -> None:
    ws = workspace.adopt(repo)
    known = git(repo, "rev-parse", "HEAD")
    _age(repo)
    assert workspace.head_commit(ws) == known
    outside = tmp_path / "secret"
    outside.write_text("f" * 40 + "\n")
    ref = repo / ".git" / "refs" / "heads" / "main"
    ref.unlink()
    ref.symlink_to(outside)
    assert workspace.head_commit(ws) == known
