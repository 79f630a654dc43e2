"""Watch a host file with inotify: the tests that prove a file outside a checkout is never
opened because a repository names it (no IN_OPEN, no IN_ACCESS)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from inotify_simple import INotify, flags


@contextmanager
def opens_of(path: Path) -> Iterator[list[str]]:
    """Collects the names of the open/read events on `path` while the block runs."""
    seen: list[str] = []
    watcher = INotify()
    try:
        watcher.add_watch(str(path), flags.OPEN | flags.ACCESS)
        yield seen
        for event in watcher.read(timeout=0):
            seen += [str(f.name) for f in flags.from_mask(event.mask)]
    finally:
        watcher.close()
