"""`head_commit` on real git repositories: every way git moves HEAD is seen on the next
call, whether or not the answer was remembered, and an unchanged HEAD is not read again."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
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


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    workspace._heads.clear()
    yield
    workspace._heads.clear()


@pytest.fixture(params=["settled", "racy"])
def racy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """settled: every file counts as old enough to be remembered; racy: the real window (the
    test's files are all new, so nothing is remembered)."""
    if request.param == "settled":
        monkeypatch.setattr(workspace, "RACY_NS", -(10**18))
    return str(request.param)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "a")
    return repo


def test_every_move_of_head_is_seen(repo: Path, racy: str) -> None:
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


def test_a_subdirectory_uses_the_enclosing_repository(repo: Path, racy: str) -> None:
    (repo / "pkg").mkdir()
    ws = workspace.adopt(repo / "pkg")
    assert workspace.head_commit(ws) == git(repo, "rev-parse", "HEAD")
    new = commit(repo, "b")
    assert workspace.head_commit(ws) == new


def test_an_unborn_branch_or_a_git_file_answers_the_known_commit(
    repo: Path, tmp_path: Path, racy: str
) -> None:
    ws = workspace.adopt(repo)
    git(repo, "checkout", "-q", "--orphan", "nothing-yet")
    assert workspace.head_commit(ws) == ws.commit
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked), "main")
    assert (linked / ".git").is_file()
    other = workspace.adopt(linked)
    assert workspace.head_commit(other) == other.commit


def test_an_unchanged_settled_head_is_not_read_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workspace, "RACY_NS", -(10**18))
    reads: list[str] = []
    real = workspace._read_text

    def counting(path: str) -> str:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(workspace, "_read_text", counting)
    ws = workspace.adopt(repo)
    head = workspace.head_commit(ws)
    assert len(reads) == 2  # HEAD and refs/heads/main
    for _ in range(5):
        assert workspace.head_commit(ws) == head
    assert len(reads) == 2
    new = commit(repo, "b")
    assert workspace.head_commit(ws) == new
    assert len(reads) == 4
