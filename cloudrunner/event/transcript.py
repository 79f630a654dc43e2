"""Whether the event's transcript file can be shown to hooks, and how.

The payload's `transcript_path` (and `CURSOR_TRANSCRIPT_PATH`) names a file on the agent's
machine. When it exists on the worker's host as a regular file, it is bind-mounted
read-only at that same path in the sandboxes, so the path hooks are given works there.
Refused (not mounted, and the record says why): a relative path, a missing file, a path
that is or passes through a symbolic link, anything that is not a regular file, anything
under the state directory (other sessions' state, clones, homes) and anything under
/proc, /sys or /dev. A transcript inside the workspace is already visible through the
workspace's own mount.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

_SYSTEM = ("/proc", "/sys", "/dev")


@dataclass(frozen=True)
class Transcript:
    """`mount` is the file to bind-mount (None: nothing to mount); `visible` whether the
    path exists in the sandbox; `reason` says which, for the record."""

    path: str
    mount: Path | None
    visible: bool
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "visible_to_hooks": self.visible, "reason": self.reason}


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def resolve(path: str | None, *, state_dir: Path, workspace: Path) -> Transcript | None:
    """What to do with the event's transcript path (None when the event names none)."""
    if not path:
        return None

    def hidden(why: str) -> Transcript:
        return Transcript(
            path, None, False, f"not mounted: {why}; CURSOR_TRANSCRIPT_PATH names a file "
            "hooks cannot open"
        )  # fmt: skip

    if not os.path.isabs(path):
        return hidden("it is not an absolute path")
    normal = os.path.normpath(path)
    if normal != path:
        return hidden("it is not in normal form (no '..', '.' or '//' is mounted)")
    try:
        st = os.lstat(normal)
    except OSError:
        return hidden("it does not exist on the worker's host")
    if stat.S_ISLNK(st.st_mode) or os.path.realpath(normal) != normal:
        return hidden("it is a symbolic link or lies under one; only a regular file is mounted")
    if not stat.S_ISREG(st.st_mode):
        return hidden("it is not a regular file")
    if any(_inside(normal, root) for root in _SYSTEM):
        return hidden("it lies under /proc, /sys or /dev")
    if _inside(normal, os.path.realpath(state_dir)):
        return hidden("it lies under the worker's state directory")
    if _inside(normal, os.path.realpath(workspace)):
        return Transcript(path, None, True, "inside the workspace, visible through its mount")
    return Transcript(path, Path(normal), True, "mounted read-only at its own path")
