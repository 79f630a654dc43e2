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

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cloudrunner.workspace import real_path

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
    if stat.S_ISLNK(st.st_mode) or real_path(normal) != normal:
        return hidden("it is a symbolic link or lies under one; only a regular file is mounted")
    if not stat.S_ISREG(st.st_mode):
        return hidden("it is not a regular file")
    if any(_inside(normal, root) for root in _SYSTEM):
        return hidden("it lies under /proc, /sys or /dev")
    if _inside(normal, real_path(state_dir)):
        return hidden("it lies under the worker's state directory")
    if _inside(normal, real_path(workspace)):
        return Transcript(path, None, True, "inside the workspace, visible through its mount")
    return Transcript(path, Path(normal), True, "mounted read-only at its own path")


#: how much of a transcript's end is read for its last assistant message
TAIL_BYTES = 4 << 20


def last_assistant_message(shown: Transcript | None) -> str | None:
    """The text of the transcript's last assistant message (what Claude Code gives a `Stop`
    hook as `last_assistant_message`), or None: no transcript hooks may see, unreadable, or
    no assistant message in its last `TAIL_BYTES`.

    Read only when hooks may see the file anyway (`shown.visible`: the same checks as for
    the mount), without following a symbolic link at the last step, and only its end.
    Cursor writes JSON lines (`{"role": "assistant", ...}`, the text in `text`, `content`
    or `message.content`, a string or a list of `{"type": "text", "text": ...}` blocks); a
    plain-text transcript's last `assistant:` block is read as well."""
    if shown is None or not shown.visible:
        return None
    try:
        fd = os.open(shown.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        start = max(0, st.st_size - TAIL_BYTES)
        data = os.pread(fd, min(st.st_size, TAIL_BYTES), start)
    except OSError:
        return None
    finally:
        os.close(fd)
    text = data.decode("utf-8", "replace")
    if start:
        text = text.partition("\n")[2]  # the first line is cut
    return _last_in_json_lines(text) or _last_in_plain_text(text)


def _last_in_json_lines(text: str) -> str | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(entry, dict):
            continue
        message = entry.get("message")
        inner = message if isinstance(message, dict) else {}
        role = entry.get("role") or entry.get("type") or inner.get("role")
        if role != "assistant":
            continue
        for value in (entry.get("text"), entry.get("content"), inner.get("content"),
                      inner.get("text")):  # fmt: skip
            found = _text_of(value)
            if found:
                return found
    return None


def _text_of(value: object) -> str | None:
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, list):
        parts = [
            block["text"]
            for block in value
            if isinstance(block, dict)
            and block.get("type", "text") == "text"
            and isinstance(block.get("text"), str)
        ]
        joined = "\n".join(p for p in parts if p.strip()).strip()
        return joined or None
    return None


def _last_in_plain_text(text: str) -> str | None:
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().lower() == "assistant:"]
    if not starts:
        return None
    block: list[str] = []
    for line in lines[starts[-1] + 1 :]:
        if line.strip().lower() in ("user:", "assistant:"):
            break
        block.append(line)
    return "\n".join(block).strip() or None
