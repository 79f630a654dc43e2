"""Hook homes: where they are, what they hold at first, how big they may grow."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.event import hook_home
from cloudrunner.event.hook_home import HomeError
from tests.support.ci import needs_root
from tests.support.git_repos import init_repo

UID = 10001


def _prepare(path: Path, workspace: Path, limit: int = 1 << 20) -> hook_home.HomeStatus:
    uid = UID if os.geteuid() == 0 else os.geteuid()
    return hook_home.prepare(
        path, uid, uid, workspace=workspace, limit=limit,
        git_name='Hook "the" Runner', git_email="hook@example.invalid",
    )  # fmt: skip


def test_homes_differ_per_source_and_workspace_and_stay_under_their_root(tmp_path: Path) -> None:
    root = tmp_path / "homes"
    a, b = tmp_path / "a", tmp_path / "b"
    homes = {
        hook_home.home_dir(root, ws, source)
        for ws in (a, b)
        for source in ("enterprise", "team", "project")
    }
    assert len(homes) == 6
    assert all(home.is_relative_to(root) for home in homes)
    # the same checkout reached through a symbolic link has the same home
    a.mkdir()
    (tmp_path / "link").symlink_to(a)
    assert hook_home.home_dir(root, tmp_path / "link", "project") == hook_home.home_dir(
        root, a, "project"
    )


def test_a_new_home_belongs_to_the_hook_uid_and_its_gitconfig_makes_git_work(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "mono"
    (ws / "pkg").mkdir(parents=True)
    init_repo(ws, branch=None)
    home = tmp_path / "homes" / "k" / "project"
    status = _prepare(home, ws / "pkg")
    assert status.created
    st = home.stat()
    assert st.st_mode & 0o777 == 0o700
    if os.geteuid() == 0:
        assert st.st_uid == UID
    # git itself reads the file: safe.directory names the package and the repository top
    out = subprocess.run(
        ["git", "config", "--file", str(home / ".gitconfig"), "--get-all", "safe.directory"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\n")  # fmt: skip
    assert out[:2] == [str(ws / "pkg"), str(ws)]
    name = subprocess.run(
        ["git", "config", "--file", str(home / ".gitconfig"), "user.name"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert name == 'Hook "the" Runner'


def test_a_hooks_own_gitconfig_is_kept_and_a_symlink_is_not_followed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "homes" / "k" / "project"
    _prepare(home, ws)
    (home / ".gitconfig").write_text("[user]\n\tname = mine\n")
    assert not _prepare(home, ws).created
    assert (home / ".gitconfig").read_text() == "[user]\n\tname = mine\n"
    (home / ".gitconfig").unlink()
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    (home / ".gitconfig").symlink_to(victim)
    _prepare(home, ws)
    assert victim.read_text() == "untouched\n"


def test_the_size_is_counted_once_per_inode_and_over_the_limit_is_refused(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "homes" / "k" / "project"
    _prepare(home, ws)
    (home / "cache").mkdir()
    (home / "cache" / "blob").write_bytes(os.urandom(64 * 1024))
    os.link(home / "cache" / "blob", home / "same-blob")
    (home / "outside").symlink_to("/usr")  # never followed
    used = _prepare(home, ws).used
    assert 64 * 1024 <= used < 2 * 64 * 1024 + 64 * 1024
    with pytest.raises(HomeError) as refused:
        _prepare(home, ws, limit=32 * 1024)
    assert str(home) in refused.value.message
    assert "home.max_bytes" in refused.value.message


@needs_root("needs root to own homes as another uid")
def test_a_home_of_another_uid_is_refused_with_the_fix(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "homes" / "k" / "project"
    _prepare(home, ws)
    with pytest.raises(HomeError, match="belongs to uid 10001, not to the hook uid 2000"):
        hook_home.prepare(
            home, 2000, 2000, workspace=ws, limit=1 << 20, git_name="n", git_email="e@x"
        )


def test_remove_all_removes_the_homes_and_nothing_a_link_points_at(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "file").write_text("k\n")
    root = tmp_path / "homes"
    home = hook_home.home_dir(root, ws, "project")
    _prepare(home, ws)
    (home / "link").symlink_to(keep)
    hook_home.remove_all(root)
    assert not root.exists()
    assert (keep / "file").read_text() == "k\n"


def test_many_workers_making_one_home_at_once_all_get_it(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "homes" / "k" / "project"
    script = (
        "import sys, os\n"
        "from pathlib import Path\n"
        "from cloudrunner.event import hook_home\n"
        "uid = 10001 if os.geteuid() == 0 else os.geteuid()\n"
        "s = hook_home.prepare(Path(sys.argv[1]), uid, uid, workspace=Path(sys.argv[2]),\n"
        "    limit=1 << 20, git_name='n', git_email='e@x')\n"
        "print(int(s.created))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(home), str(ws)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0] * 8
    assert sorted(outs) == ["0"] * 7 + ["1"]


@needs_root("the window is between the worker's mkdir (as root) and its chown")
def test_an_event_arriving_while_the_home_is_made_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "homes" / "k" / "project"
    real_chown = os.chown
    second: dict[str, object] = {}

    def attempt() -> None:
        try:
            second["status"] = _prepare(home, ws)
        except HomeError as exc:
            second["status"] = exc

    def racing_chown(*args: Any, **kwargs: Any) -> None:
        if "thread" not in second:  # a concurrent event of the same source, mid-making
            second["thread"] = threading.Thread(target=attempt)
            second["thread"].start()
            second["thread"].join(0.5)  # it may not see a home before it is the hook uid's
        real_chown(*args, **kwargs)

    monkeypatch.setattr(hook_home.os, "chown", racing_chown)
    first = _prepare(home, ws)
    thread = second["thread"]
    assert isinstance(thread, threading.Thread)
    thread.join(30)
    assert first.created
    status = second["status"]
    assert isinstance(status, hook_home.HomeStatus), status
    assert not status.created and home.stat().st_uid == UID
    assert not list(home.parent.glob(".*.making")), "nothing of the making is left"


@needs_root("needs root to become another uid")
def test_a_worker_that_may_not_chown_leaves_hooks_the_images_home_and_says_why(
    tmp_path: Path,
) -> None:
    tmp_path = Path(tempfile.mkdtemp(prefix="cloudrunner-home-"))  # every uid can reach it
    tmp_path.chmod(0o755)
    base = tmp_path / "homes"
    base.mkdir()
    os.chown(base, 5000, 5000)
    ws = tmp_path / "ws"
    ws.mkdir()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(read_end)
        os.setgroups([])
        os.setresgid(5000, 5000, 5000)
        os.setresuid(5000, 5000, 5000)
        try:
            hook_home.prepare(
                base / "k" / "project", 6000, 6000, workspace=ws, limit=1 << 20,
                git_name="n", git_email="e@x",
            )  # fmt: skip
            message = "made"
        except hook_home.HomeUnavailable as exc:
            message = exc.message
        except BaseException as exc:
            message = f"other: {exc!r}"
        os.write(write_end, message.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as fh:
        message = fh.read()
    os.waitpid(pid, 0)
    made = (base / "k" / "project").exists()
    shutil.rmtree(tmp_path)
    assert "cannot hand the hook HOME" in message and "keep the image's HOME" in message
    assert not made


def test_a_wide_home_is_measured_whole_and_a_deep_one_is_refused(tmp_path: Path) -> None:
    wide = tmp_path / "wide"
    wide.mkdir()
    for n in range(300):
        (wide / f"d{n}").mkdir()
        (wide / f"d{n}" / "f").write_bytes(b"x" * 4096)
    fd = os.open(wide, os.O_RDONLY)
    try:
        assert hook_home.measure(fd, 1 << 40) >= 300 * 4096  # no directory left out
    finally:
        os.close(fd)
    deep = tmp_path / "deep"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY)
    try:
        step = os.dup(fd)
        for _ in range(hook_home.MAX_DEPTH + 2):
            os.mkdir("d", dir_fd=step)
            child = os.open("d", os.O_RDONLY, dir_fd=step)
            os.close(step)
            step = child
        os.close(step)
        with pytest.raises(HomeError, match="deeper than 512 levels"):
            hook_home.measure(fd, 1 << 40)
    finally:
        os.close(fd)
