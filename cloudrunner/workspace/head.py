"""The commit checked out in a workspace now, read from the git directory's files without a
process (a daemon asks on every event), remembered by the files' identities."""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path

from cloudrunner.memo import BoundedMemo
from cloudrunner.workspace.checkout import Workspace
from cloudrunner.workspace.repo_files import RepoFileRefused, read_inside

_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def head_commit(ws: Workspace) -> str | None:
    """The commit checked out in `ws` now, read from the git directory's files (no process:
    a daemon asks on every event). Anything unusual (a `.git` file, a symbolic ref to
    nowhere, a file that leads outside the repository) answers the commit known from the
    checkout or adoption; a branch with no commit yet answers None until its first commit."""
    found = _git_dir_of(ws.root)
    if found is None:
        return ws.commit
    directory, git_dir = found
    key = (str(git_dir), ws.commit)
    remembered = _heads.get(key)
    if remembered is not None and _head_files(git_dir, remembered[2]) == remembered[0]:
        return remembered[1]
    commit, ref = _read_head(git_dir, directory, ws.commit)
    ids = _head_files(git_dir, ref)
    # Remembered only when the files are not so recent that a rewrite in place could keep
    # its time stamps (see cloudrunner.sources.RACY_NS), and when a second read after taking their
    # identity says the same: a change between the first read and the identity shows there.
    if ids[0] is not None and _settled_files(ids):
        again = _read_head(git_dir, directory, ws.commit)
        if again == (commit, ref) and _head_files(git_dir, ref) == ids:
            _heads.put(key, (ids, commit, ref))
    return commit


def _git_dir_of(root: Path) -> tuple[Path, Path] | None:
    """The repository directory holding `root` and its `.git` directory, or None when the
    nearest `.git` is not a directory (a worktree's or submodule's `.git` file) or there is
    none (or it cannot be looked at). One stat per directory, the checkout's own first: on the
    daemon's every event that is the only one."""
    for directory in (root, *root.parents):
        try:
            mode = os.stat(f"{directory}/.git").st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue  # none here: the parent's
        except OSError:
            return None
        return (directory, directory / ".git") if stat.S_ISDIR(mode) else None
    return None


def _read_head(git_dir: Path, directory: Path, known: str | None) -> tuple[str | None, str | None]:
    """HEAD's commit read from the files (`known` when they say nothing usable), and the
    ref HEAD names (None for a detached HEAD)."""
    # Read only what resolves inside the repository: a ref symlinked (or named with "..")
    # to a file elsewhere must not put that file's content in the records as a commit.
    head = _git_file(git_dir / "HEAD", directory)
    if head is None:
        return known, None
    if _SHA.fullmatch(head):
        return head, None
    if not head.startswith("ref: "):
        return known, None
    ref = head[len("ref: ") :]
    loose = git_dir / ref
    if loose.is_file():
        value = _git_file(loose, directory)
        return (value if value is not None and _SHA.fullmatch(value) else known), ref
    packed = _git_file(git_dir / "packed-refs", directory, _MAX_PACKED_REFS)
    for line in (packed or "").splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and _SHA.fullmatch(sha):
            return sha, ref
    return known, ref


_FileId = tuple[int, int, int, int, int] | None
#: (git dir, known commit) -> (identity of HEAD, its ref and packed-refs; commit; ref):
#: a daemon asks on every event, and the files change only with a commit or checkout
_HeadFiles = tuple[_FileId, _FileId, _FileId]
_heads: BoundedMemo[tuple[str, str | None], tuple[_HeadFiles, str | None, str | None]] = (
    BoundedMemo()
)
#: a file changed this recently (ns) is read again on every event
_RACY_NS = 2_000_000_000


def _file_id(path: str) -> _FileId:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _head_files(git_dir: Path, ref: str | None) -> _HeadFiles:
    """The identity (lstat) of HEAD and, when it names `ref`, of the loose ref and
    packed-refs: git replaces these files (a lock file renamed over them) when they change."""
    base = str(git_dir)
    head = _file_id(base + "/HEAD")
    if ref is None:
        return head, None, None
    return head, _file_id(f"{base}/{ref}"), _file_id(base + "/packed-refs")


def _settled_files(ids: _HeadFiles) -> bool:
    now = time.time_ns()
    return all(found is None or now - max(found[3], found[4]) > _RACY_NS for found in ids)


#: a packed-refs file larger than this is not read (the known commit is answered)
_MAX_PACKED_REFS = 64 * 1024 * 1024


def _git_file(path: Path, repository: Path, max_bytes: int = 4096) -> str | None:
    """The stripped text of a small file of the git directory, or None when it is absent,
    leads outside `repository`, is too large or is not UTF-8."""
    try:
        return read_inside(path, repository, max_bytes=max_bytes).decode("utf-8").strip()
    except (OSError, RepoFileRefused, UnicodeDecodeError):
        return None
