"""Real read-only file systems for tests: bind mounts and tmpfs, unmounted in any case."""

from __future__ import annotations

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
