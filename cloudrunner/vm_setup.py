"""A cloud agent's VM set up in one step: the agent's hooks configuration, routing each of
the 14 cloud events to the per-event client, and a systemd unit running the daemon on the
agent's workspace; and the check of an existing configuration against the loaded sources.

The agent's configuration is computed from the hooks cloudrunner itself loads (enterprise,
team and the workspace's project hooks, as `serve` would load them):

- each event's `timeout` is above the longest run cloudrunner can make of it: sources run
  one after the other in priority order, the hooks of one source side by side (at most
  `max_parallel_hooks` at once), each for its own `timeout` or the default `hook_timeout`;
  plus a margin for the daemon's own work (a sandbox start, the audit syncs). An event with
  no hook loaded yet still gets the default hook timeout: a commit may add one.
- an event is `failClosed` when a loaded hook for it is `failClosed`, so that a client that
  cannot answer at all (killed, timed out) blocks it as the hook itself would.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.events import CLOUD_EVENTS
from cloudrunner.settings import Settings
from cloudrunner.source_settings import source_settings
from cloudrunner.sources import LoadedSource, load_sources

#: seconds added to the longest run for the daemon's own work on the event
MARGIN_S = 30
#: the compiled client's file name (beside the `cloudrunner` command)
COMPILED_CLIENT = "cloudrunner-hook"
#: the clients, preferred first: each takes `hook EVENT`
CLIENT_NAMES = (COMPILED_CLIENT, "cloudrunner")


class VmSetupError(CloudrunnerError):
    """The VM cannot be set up as asked."""


@dataclass(frozen=True)
class EventNeed:
    """What the agent's entry for one event needs."""

    event: str
    #: the agent's timeout for the client, in whole seconds
    timeout: int
    fail_closed: bool
    #: the longest hook: (where it is, its timeout in seconds); None when none is loaded
    longest: tuple[str, float] | None
    #: the failClosed hooks that make the event failClosed
    fail_closed_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Client:
    """The per-event client the agent runs: the compiled one when present."""

    argv: tuple[str, ...]
    compiled: bool

    def command(self, event: str, socket: Path) -> str:
        words = [*self.argv, event, "--socket", str(socket)]
        return " ".join(shlex.quote(w) for w in words)

    @property
    def label(self) -> str:
        return (
            f"the compiled client {' '.join(self.argv)}"
            if self.compiled
            else f"the Python client {' '.join(self.argv)} (no {COMPILED_CLIENT} beside it)"
        )


@dataclass(frozen=True)
class Plan:
    needs: tuple[EventNeed, ...]
    #: what the sources said that the operator should know (unloaded project hooks, ...)
    notes: tuple[str, ...] = field(default=())


def find_client(explicit: Path | None = None, bin_dir: Path | None = None) -> Client:
    """`explicit` (a `cloudrunner-hook` or a `cloudrunner` command), else the first of
    them beside this interpreter's `cloudrunner`, else the first on PATH. Both take the
    event after the word `hook`."""
    if explicit is not None:
        if not explicit.is_absolute():
            raise VmSetupError(f"--client {explicit} is not an absolute path; give the full path")
        if explicit.name not in CLIENT_NAMES:
            raise VmSetupError(
                f"--client {explicit} is neither {COMPILED_CLIENT} nor cloudrunner; give the "
                "path of one of them"
            )
        if not (explicit.is_file() and os.access(explicit, os.X_OK)):
            raise VmSetupError(f"--client {explicit} is not an executable file")
        return Client((str(explicit), "hook"), compiled=explicit.name == COMPILED_CLIENT)
    where = bin_dir or Path(sys.executable).parent
    for name in CLIENT_NAMES:
        candidate = where / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return Client((str(candidate), "hook"), compiled=name == COMPILED_CLIENT)
    for name in CLIENT_NAMES:  # then on PATH (a binary copied to /usr/local/bin, say)
        found = shutil.which(name)
        if found is not None:
            return Client((os.path.abspath(found), "hook"), compiled=name == COMPILED_CLIENT)
    raise VmSetupError(
        f"no client found: neither {COMPILED_CLIENT} nor cloudrunner beside this cloudrunner "
        "or on PATH; give --client PATH"
    )


def plan(settings: Settings) -> Plan:
    """Each cloud event's timeout and failClosed from the sources `serve` would load."""
    root = settings.workspace.path
    notes: list[str] = []
    workspace = root if root is not None and root.is_dir() else None
    if workspace is None:
        notes.append(
            f"the workspace {root} holds no checkout yet, so its project hooks are not "
            "counted; run `cloudrunner vm --check` again once it is cloned"
        )
    loaded = load_sources(source_settings(settings, workspace))
    for diagnostic in loaded.diagnostics:
        if diagnostic.is_error:
            notes.append(f"{diagnostic.file}: {diagnostic.message}")
    needs = tuple(
        _need(event, loaded.loaded, settings.hook_timeout, settings.max_parallel_hooks)
        for event in CLOUD_EVENTS
    )
    return Plan(needs, tuple(notes))


def _need(event: str, sources: Sequence[LoadedSource], default: float, parallel: int) -> EventNeed:
    run_s = 0.0
    longest: tuple[str, float] | None = None
    closed: list[str] = []
    for source in sources:
        entries = source.hooks.get(event, ())
        timeouts = []
        for entry in entries:
            if entry.definition.type != "command":
                continue
            seconds = entry.definition.timeout or default
            timeouts.append(seconds)
            where = f"{source.kind} {source.path}{entry.pointer}"
            if longest is None or seconds > longest[1]:
                longest = (where, seconds)
            if entry.definition.fail_closed:
                closed.append(where)
        if timeouts:
            batches = math.ceil(len(timeouts) / parallel)
            run_s += batches * max(timeouts)
    timeout = math.ceil(max(run_s, default)) + MARGIN_S
    return EventNeed(event, timeout, bool(closed), longest, tuple(closed))


def agent_hooks(needs: Sequence[EventNeed], client: Client, socket: Path) -> dict[str, Any]:
    """The agent's hooks file: one entry per cloud event, calling the client."""
    hooks: dict[str, list[dict[str, Any]]] = {}
    for need in needs:
        entry: dict[str, Any] = {
            "command": client.command(need.event, socket),
            "timeout": need.timeout,
        }
        if need.fail_closed:
            entry["failClosed"] = True
        hooks[need.event] = [entry]
    return {"version": 1, "hooks": hooks}


def systemd_unit(settings: Settings, serve: Sequence[str], user: str | None) -> str:
    """A unit running `serve` (its argv) after the engine, restarted on failure, given
    longer to stop than the daemon drains."""
    state = settings.state_dir
    lines = [
        "[Unit]",
        f"Description=cloudrunner: agent hooks for the workspace {settings.workspace.path}",
        "Wants=docker.service",
        "After=docker.service network-online.target",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(_unit_word(w) for w in serve),
        f"Environment={_unit_word(f'CLOUDRUNNER_STATE_DIR={state}')}",
        "Restart=on-failure",
        "RestartSec=2",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={math.ceil(settings.server.drain_timeout_s) + 15}",
        "LimitNOFILE=65536",
    ]
    if user:
        lines += [f"User={user}", "SupplementaryGroups=docker"]
    if state.parent == Path("/var/lib"):
        # systemd makes it, owned by the service's user, and keeps it across restarts
        lines += [f"StateDirectory={state.name}", "StateDirectoryMode=0755"]
    lines += ["", "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


def serve_argv(settings: Settings, cloudrunner: str, given: Sequence[str]) -> list[str]:
    """The daemon's command line: the settings flags `vm` was given (`given`, so the
    daemon loads what this plan was made from), with the state directory, the socket and
    the workspace always spelt out."""
    argv = [cloudrunner, "serve", *given]
    for flag, value in (
        ("--state-dir", settings.state_dir),
        ("--socket", settings.socket_path),
        ("--workspace", settings.workspace.path),
    ):
        if flag not in given and value is not None:
            argv += [flag, str(value)]
    return argv


def _unit_word(word: str) -> str:
    """A word of a unit's command line: systemd's quoting, `%` and `$` escaped."""
    escaped = word.replace("%", "%%").replace("$", "$$")
    if escaped and not any(c in escaped for c in " \t\"'\\;"):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ------------------------------------------------------------------------------ check


def check(document: object, needs: Sequence[EventNeed]) -> list[str]:
    """What an existing agent configuration lacks, one line per fault (empty: none)."""
    if not isinstance(document, Mapping) or not isinstance(document.get("hooks"), Mapping):
        return ['the file is not a hooks file: no "hooks" object']
    hooks: Mapping[str, Any] = document["hooks"]
    faults: list[str] = []
    for need in needs:
        entries = hooks.get(need.event)
        routed = [
            e
            for e in (entries if isinstance(entries, list) else [])
            if isinstance(e, Mapping) and _routes(e.get("command"), need.event)
        ]
        if not routed:
            faults.append(f"{need.event}: not routed to the cloudrunner client")
            continue
        for entry in routed:
            faults += _entry_faults(need, entry)
    return faults


def foreign_entries(document: object) -> list[str]:
    """The entries of an existing agent hooks file that do not call a cloudrunner client
    (`EVENT: command`): writing the file anew would drop them."""
    if not isinstance(document, Mapping) or not isinstance(document.get("hooks"), Mapping):
        return ["the file is not a hooks file"]
    found: list[str] = []
    for event, entries in document["hooks"].items():
        for entry in entries if isinstance(entries, list) else [entries]:
            command = entry.get("command") if isinstance(entry, Mapping) else None
            if not _routes(command, str(event)):
                found.append(
                    f"{event}: {str(command)[:80]!r}" if command else f"{event}: {entry!r:.80}"
                )
    return found


def _entry_faults(need: EventNeed, entry: Mapping[str, Any]) -> list[str]:
    faults: list[str] = []
    argv = shlex.split(str(entry["command"]))
    client = Path(argv[0])
    if not (client.is_absolute() and client.is_file() and os.access(client, os.X_OK)):
        faults.append(
            f"{need.event}: the client {argv[0]} does not exist or is not executable here"
        )
    timeout = entry.get("timeout")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
        faults.append(
            f"{need.event}: no timeout; the agent's default may end the client before "
            f"its hooks (needs at least {need.timeout}s)"
        )
    elif timeout < need.timeout:
        longest = (
            f"the longest hook ({need.longest[0]}) runs for up to {need.longest[1]:g}s"
            if need.longest is not None
            else "a hook runs for up to the default hook timeout"
        )
        faults.append(
            f"{need.event}: timeout {timeout:g}s is shorter than cloudrunner needs "
            f"({need.timeout}s): {longest}"
        )
    if need.fail_closed and entry.get("failClosed") is not True:
        faults.append(
            f"{need.event}: not failClosed, but {need.fail_closed_by[0]} is: a client that "
            "cannot answer would let the event through"
        )
    return faults


def _routes(command: object, event: str) -> bool:
    """Whether `command` runs a cloudrunner client for `event`."""
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    return (
        len(argv) >= 3
        and Path(argv[0]).name in CLIENT_NAMES
        and argv[1] == "hook"
        and argv[2] == event
    )


# ------------------------------------------------------------------------------ writing


def write_file(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace `path` atomically (a temporary file beside it, fsynced, renamed)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise VmSetupError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise VmSetupError(f"cannot write {path}: {exc.strerror}") from None


def read_hooks_file(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise VmSetupError(
            f"{path} does not exist: no agent configuration to check "
            "(write one with `cloudrunner vm` without --check)"
        ) from None
    except OSError as exc:
        raise VmSetupError(f"cannot read {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise VmSetupError(f"{path} is not a JSON hooks file: {exc}") from None
