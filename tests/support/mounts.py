"""Real read-only file systems for tests: bind mounts and tmpfs, unmounted in any case."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.ci import missing


def mount(*args: str) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        message = f"mount {' '.join(args)} is not permitted here: {proc.stderr.strip()}"
        missing(message)


@contextmanager
def read_only_view(source: Path, where: Path) -> Iterator[Path]:
    """`source` bind-mounted read-only at `where`; unmounted whatever happens."""
    where.mkdir()
    mount("--bind", str(source), str(where))
    try:
        mount("-o", "remount,bind,ro", str(where))
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


@contextmanager
def small_tmpfs(where: Path, size: str = "512k") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` (created), for disk-full tests; unmounted
    (lazily, so a daemon still holding a file cannot keep it) whatever happens."""
    where.mkdir()
    mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where))
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(directory: Path) -> Path:
    """Write a file in `directory` until its file system has no byte left; returns it."""
    filler = directory / f"filler-{len(list(directory.glob('filler-*')))}"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1 << 9, 1 << 6, 1):
            chunk = b"\0" * size
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return filler
