"""ACL grants on a real file system (no Docker): what the hook uid may do afterwards is
checked by a forked child that has become that uid."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudrunner.workspace import acl, ownership
from cloudrunner.workspace.ownership import WorkspaceAccessError
from tests.support.ci import needs_root

HOOK = 10001
pytestmark = needs_root("grants need root")


def _as_hook(action: str, path: Path) -> int:
    """errno of `action` ("write", "read", "create") on `path` as uid HOOK (0 = allowed)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            os.setgroups([])
            os.setresgid(HOOK, HOOK, HOOK)
            os.setresuid(HOOK, HOOK, HOOK)
            if action == "write":
                os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
            elif action == "read":
                os.close(os.open(path, os.O_RDONLY))
            else:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except OSError as exc:
            code = exc.errno or 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory every uid can reach (pytest's own tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="cloudrunner-acl-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def tree(base: Path) -> Path:
    tmp_path = base
    root = tmp_path / "ws"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "plain.txt").write_text("p\n")
    (root / "sub" / "secret").write_text("s\n")
    (root / "sub" / "secret").chmod(0o600)
    (root / "sub" / "tool.sh").write_text("#!/bin/sh\n")
    (root / "sub" / "tool.sh").chmod(0o755)
    (root / "ro.txt").write_text("r\n")
    (root / "ro.txt").chmod(0o444)
    for directory in (tmp_path, root):
        directory.chmod(0o755)
    return root


def test_the_hook_uid_gets_the_owners_access_everywhere_and_on_new_files(tree: Path) -> None:
    assert _as_hook("write", tree / "plain.txt") == errno.EACCES
    report = ownership.grant_workspace(tree, [HOOK])
    assert report.mechanism == "acl" and report.uids == (HOOK,)
    assert report.changed >= 7
    assert _as_hook("write", tree / "plain.txt") == 0
    assert _as_hook("read", tree / "sub" / "secret") == 0  # owner-only: the owner's access
    assert _as_hook("write", tree / "ro.txt") == errno.EACCES  # the owner cannot either
    assert _as_hook("create", tree / "sub" / "deep" / "new") == 0
    # a file the owner (root) creates later inherits the grant through the default ACL
    (tree / "sub" / "later.txt").write_text("l\n")
    assert _as_hook("write", tree / "sub" / "later.txt") == 0
    # the owner's bits are mirrored: the hook gets rwx on the script, rw on the secret
    entries = acl.decode(os.getxattr(tree / "sub" / "tool.sh", acl.ACCESS))
    assert acl.perm_of(entries, acl.USER, HOOK) == 7
    entries = acl.decode(os.getxattr(tree / "sub" / "secret", acl.ACCESS))
    assert acl.perm_of(entries, acl.USER, HOOK) == 6
    assert acl.perm_of(entries, acl.GROUP_OBJ) == 0  # the group gained nothing
    assert (tree / "plain.txt").stat().st_uid == 0  # ownership is unchanged


def test_a_second_grant_does_not_walk_again(tree: Path) -> None:
    ownership.grant_workspace(tree, [HOOK])
    again = ownership.grant_workspace(tree, [HOOK])
    assert again.changed == 0 and again.detail == "granted earlier"


def test_hooks_running_as_the_owner_need_nothing(tree: Path) -> None:
    os.chown(tree, HOOK, HOOK)
    report = ownership.grant_workspace(tree, [HOOK])
    assert report.mechanism == "owner"
    assert acl.DEFAULT not in os.listxattr(tree)


def test_symbolic_links_and_hard_links_out_of_the_workspace_are_not_touched(
    tree: Path, base: Path
) -> None:
    outside = base / "outside"
    outside.mkdir()
    target = outside / "precious"
    target.write_text("x\n")
    target.chmod(0o600)
    (tree / "link-to-file").symlink_to(target)
    (tree / "link-to-dir").symlink_to(outside)
    os.link(target, tree / "hardlink")
    report = ownership.grant_workspace(tree, [HOOK])
    assert acl.ACCESS not in os.listxattr(target)
    assert acl.ACCESS not in os.listxattr(outside)
    assert _as_hook("read", target) == errno.EACCES
    assert report.skipped == {"regular file with more than one link": 1}


def test_a_read_only_workspace_is_deferred_not_refused(tree: Path, tmp_path: Path) -> None:
    from tests.support.mounts import read_only_view

    with read_only_view(tree, tmp_path / "ro") as ro:
        report = ownership.grant_workspace(ro, [HOOK])
    assert report.mechanism == "deferred"
    assert "read-only" in report.detail


def test_a_worker_that_may_not_set_acls_is_refused_with_the_fix(tree: Path) -> None:
    os.chown(tree, 4242, 4242)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(read_end)
        os.setresgid(5000, 5000, 5000)
        os.setresuid(5000, 5000, 5000)
        try:
            ownership.grant_workspace(tree, [HOOK])
            message = "granted"
        except WorkspaceAccessError as exc:
            message = exc.message
        os.write(write_end, message.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as fh:
        message = fh.read()
    os.waitpid(pid, 0)
    assert "may not change the ACLs" in message
    assert f"setfacl -R -m u:{HOOK}:rwX -m d:u:{HOOK}:rwX {tree}" in message
    assert "run the worker as root or as uid 4242" in message


def test_a_non_root_owner_keeps_access_to_what_hooks_create(tree: Path) -> None:
    for path in (tree, tree / "sub"):
        os.chown(path, 4242, 4242)
    ownership.grant_workspace(tree, [HOOK])
    default = acl.decode(os.getxattr(tree / "sub", acl.DEFAULT))
    assert acl.perm_of(default, acl.USER, 4242) == 7
    assert acl.perm_of(default, acl.USER, HOOK) == 7


def test_a_tree_nested_deeper_than_the_limit_is_granted_to_the_limit_and_says_so(
    tree: Path,
) -> None:
    deep = tree / "sub" / "deep"
    fd = os.open(deep, os.O_RDONLY)
    try:
        for _ in range(ownership.MAX_DEPTH + 5):  # relative steps: no PATH_MAX
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    report = ownership.grant_workspace(tree, [HOOK])
    assert report.skipped == {f"directory nested deeper than {ownership.MAX_DEPTH} levels": 1}
