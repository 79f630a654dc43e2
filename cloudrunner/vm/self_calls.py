"""The daemon never loads hooks that call its own client. On a cloud agent's VM the agent's
hooks file (/etc/cursor/hooks.json) sends every event to `cloudrunner-hook hook EVENT`; a
daemon loading that file as its enterprise (or team) hooks would call itself on every
event. `serve` and `vm` refuse such a set-up before they start, naming both ends."""

from __future__ import annotations

import json
import os
import shlex
import stat
from collections.abc import Mapping
from pathlib import Path

from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.settings import Settings

#: the per-event clients' file names; each takes `hook EVENT`
CLIENT_NAMES = ("cloudrunner-hook", "cloudrunner")
#: a hooks file larger than this is not read here (the sources' own limit refuses it)
MAX_BYTES = 1024 * 1024


def calls_client(command: object) -> bool:
    """Whether a hook command runs a cloudrunner client's `hook` word."""
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    return len(argv) >= 2 and Path(argv[0]).name in CLIENT_NAMES and argv[1] == "hook"


def client_calls(path: Path) -> list[str]:
    """The entries of the hooks file at `path` (or `path`/hooks.json for a directory) that
    call a cloudrunner client, as `EVENT: command`. An absent, unreadable, oversized or
    malformed file gives none: the sources loader reports what is wrong with it."""
    if path.is_dir():
        path = path / "hooks.json"
    try:
        # non-blocking and regular files only: a FIFO put there must not hang the start
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        raw = os.read(fd, MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            return []
        document = json.loads(raw)
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    finally:
        os.close(fd)
    hooks = document.get("hooks") if isinstance(document, Mapping) else None
    if not isinstance(hooks, Mapping):
        return []
    found: list[str] = []
    for event, entries in hooks.items():
        for entry in entries if isinstance(entries, list) else [entries]:
            command = entry.get("command") if isinstance(entry, Mapping) else None
            if calls_client(command):
                found.append(f"{event}: {str(command)[:80]}")
    return found


def self_call_problem(settings: Settings) -> str | None:
    """The line that refuses a daemon whose enterprise or team hooks call its client, or None."""
    for kind, key, path in (
        (SourceKind.ENTERPRISE, "sources.enterprise_hooks", settings.sources.enterprise_hooks),
        (SourceKind.TEAM, "sources.team_hooks", settings.sources.team_hooks),
    ):
        if path is None:
            continue
        calls = client_calls(path)
        if calls:
            return (
                f"the daemon would load {path} ({key}) as its {kind} hooks, and its hooks call "
                f"the cloudrunner client ({calls[0]}{'; ...' if len(calls) > 1 else ''}), which "
                f"sends each event to this daemon ({settings.socket_path}): it would call itself "
                f"on every event. {path} is an agent's hooks file; give the daemon the fleet's "
                "hooks in a file of their own (--enterprise-hooks FILE; the default is "
                "/etc/cloudrunner/enterprise-hooks.json)"
            )
    return None
