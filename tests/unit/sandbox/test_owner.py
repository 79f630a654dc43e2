"""Who hooks run as by default: the checkout's owner, never root (real files, no Docker)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudrunner.sandbox.limits import FALLBACK_HOOK_UID
from cloudrunner.sandbox.owner import checkout_owner
from tests.support.ci import needs_root

pytestmark = needs_root("needs root to give files to other uids")

FALLBACK = (FALLBACK_HOOK_UID, FALLBACK_HOOK_UID)


def _workspace(tmp_path: Path, owner: int, git_owner: int | None) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    os.chown(ws, owner, owner)
    if git_owner is not None:
        (ws / ".git").mkdir()
        os.chown(ws / ".git", git_owner, git_owner)
    return ws


@pytest.mark.parametrize(
    ("owner", "git_owner", "expected"),
    [
        (1234, None, (1234, 1234)),  # the workspace's owner
        (1234, 2345, (1234, 1234)),  # ... even with a .git of another uid
        (0, 1234, (1234, 1234)),  # root made the directory, the agent's user the checkout
        (0, 0, FALLBACK),  # root owns both: never root
        (0, None, FALLBACK),  # no checkout yet
    ],
)
def test_the_checkouts_owner(
    tmp_path: Path, owner: int, git_owner: int | None, expected: tuple[int, int]
) -> None:
    assert checkout_owner(_workspace(tmp_path, owner, git_owner)) == expected


def test_a_gid_of_0_is_never_used(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, 0, None)
    (ws / ".git").mkdir()
    os.chown(ws / ".git", 1234, 0)
    assert checkout_owner(ws) == (1234, FALLBACK_HOOK_UID)


def test_a_git_that_is_a_symbolic_link_names_nobody(tmp_path: Path) -> None:
    """Hostile: a link is anyone's to make; it must not choose the uid hooks run as."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chown(elsewhere, 1234, 1234)
    ws = _workspace(tmp_path, 0, None)
    (ws / ".git").symlink_to(elsewhere)
    os.lchown(ws / ".git", 1234, 1234)
    assert checkout_owner(ws) == FALLBACK


def test_a_git_file_of_a_worktree_counts(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, 0, None)
    (ws / ".git").write_text("gitdir: /elsewhere/.git/worktrees/ws\n")
    os.chown(ws / ".git", 1234, 1234)
    assert checkout_owner(ws) == (1234, 1234)


def test_a_missing_workspace_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        checkout_owner(tmp_path / "absent")
