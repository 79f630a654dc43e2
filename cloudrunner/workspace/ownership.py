"""Hooks can do in the workspace what its owner can: POSIX ACL grants for the hook uids.

Hooks never run as uid 0. When the workspace belongs to root (the usual case: a cloud
agent or the worker runs as root, or the checkout is adopted), or to another uid than the
one a profile names, each hook uid is given a named-user ACL entry on every directory and
file of the workspace with the owner's own permission bits, and every directory a default
ACL entry, so what is created there later (by the agent, git, or a hook) carries the grant
too. The owner keeps its ownership; a non-root owner also gets a default entry, so it keeps
access to what hooks create (which belongs to the hook uid).

The walk is done by the worker (root) over a tree others may change meanwhile, so it never
follows a symbolic link: directories are opened with O_NOFOLLOW relative to their parent's
descriptor, files are changed through `/proc/self/fd/<dir>/<name>` without following the
last component, other file systems and multiply linked files (a hard link may lead out of
the workspace) are left alone and counted. A workspace whose root already holds the
grants is not walked again (everything created since inherited them).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cloudrunner.workspace import acl
from cloudrunner.workspace.checkout import WorkspaceError

Mechanism = Literal["owner", "acl", "deferred"]
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FULL = acl.READ | acl.WRITE | acl.EXECUTE
#: directories nested deeper than this are left alone (and counted): the walk holds one
#: descriptor per level, and a repository could nest thousands
MAX_DEPTH = 256


class WorkspaceAccessError(WorkspaceError):
    """The hook uid cannot be given the owner's access to the workspace (the fix is named)."""


@dataclass(frozen=True)
class AccessReport:
    """How hooks get the owner's access to a workspace, for the audit record.

    `mechanism`: "owner" (the hooks run as the owner: nothing to do), "acl" (granted),
    "deferred" (the workspace is read-only for now; granted once it is writable).
    """

    root: Path
    owner: int
    uids: tuple[int, ...]
    mechanism: Mechanism
    #: directories and files given the entries by this call (0: granted earlier)
    changed: int = 0
    #: what was left alone and why (other file systems, hard links, vanished entries)
    skipped: Mapping[str, int] = field(default_factory=dict)
    detail: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "mechanism": self.mechanism,
            "owner_uid": self.owner,
            "hook_uids": list(self.uids),
            "changed": self.changed,
            "skipped": dict(self.skipped),
            "detail": self.detail,
        }


def grant_workspace(root: Path, hook_uids: Iterable[int]) -> AccessReport:
    """Give every uid in `hook_uids` that is not the owner of `root` the owner's access to
    the whole tree (see the module text). Raises WorkspaceAccessError naming the fix when
    that is impossible (no ACL support, no permission); a read-only workspace is
    `deferred`, not an error (the writability gate holds events until it is writable)."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise WorkspaceAccessError(
            f"cannot open the workspace {root}: {exc.strerror}; check the path"
        ) from None
    try:
        st = os.fstat(fd)
        owner = st.st_uid
        uids = tuple(sorted({uid for uid in hook_uids if uid != owner}))
        if not uids:
            return AccessReport(root, owner, (), "owner", detail="hooks run as the owner")
        grants = {uid: _FULL for uid in uids}
        defaults = dict(grants)
        if owner != 0:
            defaults[owner] = _FULL
        if _granted(fd, st, grants, defaults):
            return AccessReport(root, owner, uids, "acl", detail="granted earlier")
        walk = _Walk(root, owner, grants, defaults, st.st_dev)
        try:
            walk.directory(fd, st)
        except OSError as exc:
            return _failed(exc, root, owner, uids, walk.changed)
        return AccessReport(
            root,
            owner,
            uids,
            "acl",
            changed=walk.changed,
            skipped=dict(walk.skipped),
            detail=f"ACL entries for uid {', '.join(map(str, uids))} mirror the owner's "
            "permissions; directories carry them as defaults",
        )
    finally:
        os.close(fd)


def _failed(
    exc: OSError, root: Path, owner: int, uids: tuple[int, ...], changed: int
) -> AccessReport:
    who = ", ".join(str(u) for u in uids)
    if exc.errno == errno.EROFS:
        return AccessReport(
            root,
            owner,
            uids,
            "deferred",
            changed=changed,
            detail="the workspace is read-only for now; the grant is made once it is writable",
        )
    first = uids[0]
    chown = f"`chown -R {first}:{first} {root}`"
    if exc.errno in (errno.EOPNOTSUPP, errno.ENOTSUP):
        raise WorkspaceAccessError(
            f"the file system of the workspace {root} does not support POSIX ACLs, so the "
            f"hook uid {who} cannot be given the access its owner (uid {owner}) has; mount "
            f"it with ACL support (the `acl` mount option), hand it to the hook uid with "
            f"{chown}, or run hooks as the owner (sandbox.user = {owner})"
            if owner
            else f"the file system of the workspace {root} does not support POSIX ACLs, so "
            f"the hook uid {who} cannot be given the access its owner (root) has; mount it "
            f"with ACL support (the `acl` mount option) or hand it to the hook uid with {chown}"
        ) from None
    if exc.errno == errno.EPERM:
        raise WorkspaceAccessError(
            f"cloudrunner (uid {os.geteuid()}) may not change the ACLs of the workspace "
            f"{root} (owned by uid {owner}), so the hook uid {who} cannot be given the "
            f"owner's access; run the worker as root or as uid {owner}, or grant it "
            f"yourself: setfacl -R -m u:{first}:rwX -m d:u:{first}:rwX {root}"
        ) from None
    raise WorkspaceAccessError(
        f"cannot give the hook uid {who} access to the workspace {root}: "
        f"{exc.strerror or exc} ({errno.errorcode.get(exc.errno or 0, 'error')}); "
        f"grant it yourself (setfacl -R -m u:{first}:rwX -m d:u:{first}:rwX {root}) or {chown}"
    ) from None


def _read(target: int | str, name: str) -> tuple[acl.Entry, ...] | None:
    try:
        return acl.decode(os.getxattr(target, name, follow_symlinks=isinstance(target, int)))
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.EOPNOTSUPP, errno.ENOTSUP):
            return None
        raise
    except acl.AclFormatError:
        return None


def _granted(
    fd: int, st: os.stat_result, grants: Mapping[int, int], defaults: Mapping[int, int]
) -> bool:
    access = _read(fd, acl.ACCESS)
    default = _read(fd, acl.DEFAULT)
    mirrored = {uid: acl.owner_perm(st.st_mode) & perm for uid, perm in grants.items()}
    return (
        access is not None
        and default is not None
        and acl.grants_hold(access, mirrored)
        and acl.grants_hold(default, defaults)
    )


class _Walk:
    def __init__(
        self,
        root: Path,
        owner: int,
        grants: Mapping[int, int],
        defaults: Mapping[int, int],
        device: int,
    ) -> None:
        self.root = root
        self.owner = owner
        self.grants = grants
        self.defaults = defaults
        self.device = device
        self.changed = 0
        self.skipped: dict[str, int] = {}

    def _skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def _access(self, target: int | str, st: os.stat_result) -> None:
        current = _read(target, acl.ACCESS) or acl.from_mode(st.st_mode)
        mirrored = {uid: acl.owner_perm(st.st_mode) & perm for uid, perm in self.grants.items()}
        if acl.grants_hold(current, mirrored):
            return
        value = acl.encode(acl.with_users(current, mirrored))
        os.setxattr(target, acl.ACCESS, value, follow_symlinks=isinstance(target, int))
        self.changed += 1

    def directory(self, fd: int, st: os.stat_result, depth: int = 0) -> None:
        self._access(fd, st)
        default = _read(fd, acl.DEFAULT)
        if default is None:
            access = _read(fd, acl.ACCESS)
            group = acl.perm_of(access, acl.GROUP_OBJ) if access else None
            base = list(acl.from_mode(st.st_mode))
            if group is not None:
                base[1] = acl.Entry(acl.GROUP_OBJ, acl.UNDEFINED_ID, group)
            default = tuple(base)
        if not acl.grants_hold(default, self.defaults):
            os.setxattr(fd, acl.DEFAULT, acl.encode(acl.with_users(default, self.defaults)))
        with os.scandir(fd) as entries:
            names = [entry.name for entry in entries]
        for name in names:
            try:
                child = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                self._skip("vanished during the walk")
                continue
            if child.st_dev != self.device:
                self._skip("on another file system")
            elif stat.S_ISDIR(child.st_mode):
                if depth >= MAX_DEPTH:
                    self._skip(f"directory nested deeper than {MAX_DEPTH} levels")
                    continue
                self._subdirectory(fd, name, depth + 1)
            elif stat.S_ISREG(child.st_mode):
                if child.st_nlink > 1:
                    # a hard link may be the same file as one outside the workspace
                    self._skip("regular file with more than one link")
                    continue
                try:
                    self._access(f"/proc/self/fd/{fd}/{name}", child)
                except FileNotFoundError:
                    self._skip("vanished during the walk")
                except OSError as exc:
                    if exc.errno not in (errno.EPERM, errno.ELOOP) or not os.path.islink(
                        f"/proc/self/fd/{fd}/{name}"
                    ):
                        raise
                    self._skip("replaced by a symbolic link during the walk")
            elif not stat.S_ISLNK(child.st_mode):
                self._skip("not a regular file or directory")

    def _subdirectory(self, parent: int, name: str, depth: int) -> None:
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            self._skip("vanished during the walk")
            return
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                self._skip("replaced by a symbolic link during the walk")
                return
            raise
        try:
            st = os.fstat(fd)
            if st.st_dev != self.device:
                self._skip("on another file system")
                return
            self.directory(fd, st, depth)
        finally:
            os.close(fd)
