"""A writable HOME for hooks, one per source and workspace, kept under the state directory.

On a cloud agent's VM a hook's `~` is writable and outlives the event: hooks keep memory,
caches and tool settings there. Here each (workspace, source) gets such a directory,
`<home_root>/<digest of the workspace's real path>/<source>`, owned by the hook uid (mode
0700) and mounted read-write at `/home/hook` in that source's sandboxes (`HOOK_HOME`, a
neutral path as on a VM: its path here would tell every hook where the worker keeps its
state); `HOME` points there. Sources and workspaces never share one: enterprise hooks
cannot read what project hooks keep, and two checkouts do not mix.

Its `.gitconfig` is written when missing (never overwritten: a hook may change it, as on a
VM): `safe.directory` for the workspace and its repository's top level (the checkout may
belong to another uid than the hooks, and git refuses such a repository otherwise) and a
`user.name`/`user.email` (a repository's own identity wins, as local config does).

Size: a file is bounded by RLIMIT_FSIZE in the sandbox; the whole home is measured before a
source's hooks run (the walk stops once past the limit) and over `max_bytes` the source's
hooks do not run, with a message naming the directory and the setting.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.workspace import real_path

GITCONFIG = ".gitconfig"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class HomeError(CloudrunnerError):
    """A hook HOME cannot be used (the message names the directory and the fix)."""


class HomeUnavailable(HomeError):
    """This worker cannot give the hook uid a home (it may not chown): hooks keep the
    image's HOME, and the record says why."""


@dataclass(frozen=True)
class HomeStatus:
    """A prepared home: where it is and what it held before the hooks ran."""

    path: Path
    #: bytes on disk (blocks), counted up to just past `limit`
    used: int
    limit: int
    created: bool

    def to_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "bytes": self.used, "limit": self.limit}


def home_dir(home_root: Path, workspace: Path, source: SourceKind) -> Path:
    """The home of `source`'s hooks in `workspace` (no I/O)."""
    key = hashlib.sha256(real_path(workspace).encode()).hexdigest()[:16]
    return home_root / key / source


def git_toplevel(workspace: Path) -> Path | None:
    """The directory holding the `.git` of the repository `workspace` is in (itself, or an
    ancestor for a package of a monorepo), or None."""
    real = Path(real_path(workspace))
    for directory in (real, *real.parents):
        if os.path.lexists(directory / ".git"):
            return directory
    return None


def gitconfig_text(safe_directories: Iterable[Path], name: str, email: str) -> str:
    lines = ["# written by cloudrunner when this HOME was made; yours to change", "[safe]"]
    seen: set[str] = set()
    for directory in safe_directories:
        text = str(directory)
        if text not in seen:
            seen.add(text)
            lines.append(f"\tdirectory = {_quote(text)}")
    lines += ["[user]", f"\tname = {_quote(name)}", f"\temail = {_quote(email)}", ""]
    return "\n".join(lines)


def _quote(value: str) -> str:
    """A git config value in double quotes (backslash, quote and newline escaped)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def prepare(
    path: Path,
    uid: int,
    gid: int,
    *,
    workspace: Path,
    limit: int,
    git_name: str,
    git_email: str,
) -> HomeStatus:
    """Make (or reuse) the home at `path` for hooks running as `uid`:`gid`, write its
    `.gitconfig` when missing, and measure it; HomeError when it cannot be used (a
    long-lived worker skips all of this for a home it prepared a moment ago, see
    `Worker._homes`)."""
    created = _make(path, uid, gid)
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        raise HomeError(
            f"cannot open the hook HOME {path}: {exc.strerror}; remove it (it is made anew)"
        ) from None
    try:
        st = os.fstat(fd)
        if st.st_uid != uid:
            raise HomeError(
                f"the hook HOME {path} belongs to uid {st.st_uid}, not to the hook uid {uid} "
                "(the hook user changed); remove the directory (it is made anew for uid "
                f"{uid}) or chown -R {uid}:{gid} it"
            )
        top = git_toplevel(workspace)
        safe = [Path(real_path(workspace)), *([top] if top else [])]
        _write_new(fd, GITCONFIG, gitconfig_text(safe, git_name, git_email), uid, gid)
        used = measure(fd, limit)
    finally:
        os.close(fd)
    if used > limit:
        raise HomeError(
            f"the hook HOME {path} holds more than {limit} bytes (home.max_bytes), so these "
            "hooks do not run; remove files from it (or the whole directory, which is made "
            "anew) or raise home.max_bytes"
        )
    return HomeStatus(path, used, limit, created)


def _make(path: Path, uid: int, gid: int) -> bool:
    """Create the home (parents root-only but searchable) owned by the hook uid; several
    workers may ask at once (one `cloudrunner run` per event, or a daemon's concurrent
    events), so under a lock. The home is made under another name, handed to the hook uid
    and then renamed into place, so nobody checking it without the lock ever sees it
    before it belongs to the hook uid."""
    if os.path.isdir(path):
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o711)
        lock = os.open(path.parent / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise HomeError(
            f"cannot create the hook HOME {path}: {exc.strerror}; give a writable state_dir"
        ) from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.lexists(path):
            return False
        making = path.with_name(f".{path.name}.making")  # a crashed maker's is empty
        with contextlib.suppress(OSError):  # not there, or not empty: mkdir says so
            os.rmdir(making)
        try:
            os.mkdir(making, 0o700)
        except OSError as exc:
            raise HomeError(
                f"cannot create the hook HOME {path}: {exc.strerror}; give a writable state_dir"
            ) from None
        try:
            os.chown(making, uid, gid, follow_symlinks=False)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.rmdir(making)
            raise HomeUnavailable(
                f"cannot hand the hook HOME {path} to the hook uid {uid}: {exc.strerror}; "
                f"hooks keep the image's HOME; run the worker as root or as uid {uid} to "
                "give them one"
            ) from None
        try:
            os.rename(making, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.rmdir(making)
            raise HomeError(
                f"cannot create the hook HOME {path}: {exc.strerror}; give a writable state_dir"
            ) from None
        return True
    finally:
        os.close(lock)


def _write_new(dir_fd: int, name: str, text: str, uid: int, gid: int) -> None:
    """Write `name` in the directory if nothing (not even a symbolic link) has that name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    except FileExistsError:
        return
    except OSError as exc:
        if exc.errno == errno.EROFS:
            return
        raise HomeError(f"cannot write {name} in the hook HOME: {exc.strerror}") from None
    try:
        os.write(fd, text.encode("utf-8"))
        if os.fstat(fd).st_uid != uid:
            os.fchown(fd, uid, gid)
    finally:
        os.close(fd)


#: a HOME nested deeper than this is refused (the walk holds one descriptor per level)
MAX_DEPTH = 512


def measure(dir_fd: int, limit: int) -> int:
    """Bytes on disk under the directory `dir_fd` (each inode once, no link followed),
    stopping once the count passes `limit`. One descriptor is open per level, so a wide
    directory costs none; nesting deeper than MAX_DEPTH is a HomeError."""
    total = 0
    seen: set[tuple[int, int]] = set()
    first = os.dup(dir_fd)
    stack: list[tuple[int, list[str]]] = [(first, _names(first))]
    try:
        while stack:
            fd, names = stack[-1]
            if not names:
                os.close(fd)
                stack.pop()
                continue
            name = names.pop()
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
            if total > limit:
                return total
            if stat.S_ISDIR(st.st_mode):
                if len(stack) >= MAX_DEPTH:
                    raise HomeError(
                        f"the hook HOME nests directories deeper than {MAX_DEPTH} levels, so "
                        "its size cannot be checked; remove the deep tree from it"
                    )
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # vanished, or replaced by a link meanwhile
                try:
                    stack.append((child, _names(child)))
                except OSError:
                    os.close(child)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return total


def _names(fd: int) -> list[str]:
    with os.scandir(fd) as entries:
        return [entry.name for entry in entries]


def remove_all(home_root: Path) -> None:
    """Remove every home under `home_root` (a closed daemon session's)."""
    # shutil.rmtree works through directory descriptors here: a symbolic link a hook
    # planted is removed, never followed.
    shutil.rmtree(home_root, ignore_errors=True)
