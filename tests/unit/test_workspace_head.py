"""`head_commit` on real git repositories: every way git moves HEAD is seen on the next
call."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cloudrunner import workspace


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=repo, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
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
