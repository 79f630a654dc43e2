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
import re
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
from cloudrunner.settings import Settings, source_settings
from cloudrunner.sources import LoadedSource, load_sources

#: seconds added to the longest run for the daemon's own work on the event
MARGIN_S = 30
#: the longest timeout written for the agent, in seconds (about 24.8 days): a JavaScript
#: timer holds at most 2**31 - 1 milliseconds, and an agent given more may fire at once
MAX_AGENT_TIMEOUT_S = (2**31 - 1) // 1000
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
    if not _finite_positive(default):
        raise VmSetupError(
            f"the default hook timeout {default!r} is not a finite positive number of seconds; "
            f"give hook_timeout at most {MAX_AGENT_TIMEOUT_S}"
        )
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
            where = _printable(f"{source.kind} {source.path}{entry.pointer}")
            if not _finite_positive(seconds) or seconds > MAX_AGENT_TIMEOUT_S:
                raise VmSetupError(_timeout_refusal(event, where, seconds))
            timeouts.append(seconds)
            if longest is None or seconds > longest[1]:
                longest = (where, seconds)
            if entry.definition.fail_closed:
                closed.append(where)
        if timeouts:
            batches = math.ceil(len(timeouts) / parallel)
            run_s += batches * max(timeouts)
    needed = max(run_s, default) + MARGIN_S
    if not math.isfinite(needed) or needed > MAX_AGENT_TIMEOUT_S:
        where = longest[0] if longest is not None else "the default hook timeout"
        raise VmSetupError(
            f"{event}: its hooks, one source after another, can run for {needed:g}s, over the "
            f"{MAX_AGENT_TIMEOUT_S}s an agent's timeout can hold (the longest is {where}); "
            "give its hooks shorter timeouts"
        )
    timeout = math.ceil(max(run_s, default)) + MARGIN_S
    return EventNeed(event, timeout, bool(closed), longest, tuple(closed))


def _finite_positive(seconds: float) -> bool:
    return isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0


def _printable(text: str) -> str:
    """`text` for a one-line message: a control character in a path shown as its escape."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _timeout_refusal(event: str, where: str, seconds: float) -> str:
    shown = "infinite" if math.isinf(seconds) else f"{seconds:g}s"
    return (
        f"{event}: the hook {where} has a timeout of {shown}, which no agent's timeout can "
        f"cover (at most {MAX_AGENT_TIMEOUT_S}s); give it a finite timeout in seconds"
    )


def agent_hooks(needs: Sequence[EventNeed], client: Client, socket: Path) -> dict[str, Any]:
    """The agent's hooks file: one entry per cloud event, calling the client."""
    hooks: dict[str, list[dict[str, Any]]] = {}
    _writable("the client path", client.argv[0])
    _writable("the socket path", str(socket))
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
    longer to stop than the daemon drains.

    Every value is written so that systemd reads back exactly what was meant (its quoting,
    C escapes, `%%` for a specifier's `%`, `$$` for a literal `$` in `ExecStart=` only,
    where variables expand); a value systemd cannot carry that way (a control character
    such as a newline, bytes that are not UTF-8) is refused in one line naming it."""
    state = settings.state_dir
    workspace = str(settings.workspace.path)
    _writable("the workspace path", workspace)
    drain = settings.server.drain_timeout_s
    if not (math.isfinite(drain) and 0 <= drain <= MAX_AGENT_TIMEOUT_S):
        raise VmSetupError(
            f"the drain timeout {drain:g}s cannot be written as the unit's TimeoutStopSec=; "
            f"give server.drain_timeout_s a finite number of seconds (at most "
            f"{MAX_AGENT_TIMEOUT_S})"
        )
    lines = [
        "[Unit]",
        # the path sits inside the line, so a trailing backslash cannot continue it
        f"Description=cloudrunner: agent hooks for the workspace {_specifiers(workspace)} "
        "(cloudrunner serve)",
        "Wants=docker.service",
        "After=docker.service network-online.target",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(exec_word(w, first=i == 0) for i, w in enumerate(serve)),
        "Environment=" + environment_assignment("CLOUDRUNNER_STATE_DIR", str(state)),
        "Restart=on-failure",
        "RestartSec=2",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={math.ceil(drain) + 15}",
        "LimitNOFILE=65536",
    ]
    if user:
        if not _USER_NAME.fullmatch(user):
            raise VmSetupError(
                f"--user {user!r} is not a user name systemd takes (letters, digits, `_`, "
                "`.`, `-`, not starting with `-` or `.`); give the account's name"
            )
        lines += [f"User={user}", "SupplementaryGroups=docker"]
    if state.parent == Path("/var/lib") and _STATE_NAME.fullmatch(state.name):
        # systemd makes it, owned by the service's user, and keeps it across restarts
        lines += [f"StateDirectory={state.name}", "StateDirectoryMode=0755"]
    elif state.parent == Path("/var/lib"):
        bad = next((c for c in state.name if not _STATE_NAME.fullmatch(c)), state.name[:1])
        raise VmSetupError(
            f"the state directory {str(state)!r} has a name StateDirectory= cannot carry as "
            f"it is ({bad!r}; only letters, digits, `.`, `_`, `-`); choose a plainer name "
            "under /var/lib, or a state directory elsewhere"
        )
    lines += ["", "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


_USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")
_STATE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def _unwritable_character(text: str) -> str | None:
    """The first character of `text` a unit line cannot hold as itself, described."""
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            return f"the byte 0x{code - 0xDC00:02x}, which is not UTF-8"
        if 0xD800 <= code <= 0xDFFF:
            return f"the lone surrogate U+{code:04X}"
        if code < 0x20 or 0x7F <= code <= 0x9F:
            name = {0x0A: "a newline", 0x0D: "a carriage return", 0x09: "a tab",
                    0x00: "a NUL"}.get(code, "a control character")  # fmt: skip
            return f"{name} (U+{code:04X})"
    return None


def _writable(what: str, text: str) -> None:
    """Refuse, in one line naming the character, what systemd cannot read back exactly."""
    bad = _unwritable_character(text)
    if bad is not None:
        raise VmSetupError(
            f"{what} {text!r} holds {bad}, which cloudrunner does not write into a systemd "
            "unit; choose a path (or value) without control characters"
        )


def _specifiers(text: str) -> str:
    """`%` escaped for a setting systemd expands specifiers in."""
    return text.replace("%", "%%")


def _quoted(text: str) -> str:
    """In systemd's double quotes: `\\` and `"` escaped (C escapes are read back)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exec_word(word: str, *, first: bool = False) -> str:
    """A word of `ExecStart=`: `%%` and `$$` (specifiers and variables expand there), and
    quoted when it holds a blank, a quote, a backslash or a `;` (and, as the program, when
    it starts with a character systemd reads as a prefix such as `-` or `@`)."""
    _writable("the command-line word", word)
    if word == ";":
        raise VmSetupError("the command-line word ';' would end the unit's command; drop it")
    escaped = _specifiers(word).replace("$", "$$")
    if (
        escaped
        and not any(c in escaped for c in " \t\"'\\;")
        and not (first and escaped[0] in "@-:+!")
    ):
        return escaped
    return _quoted(escaped)


def environment_assignment(name: str, value: str) -> str:
    """`NAME=value` for `Environment=`: quoted, `%%` (specifiers expand there), and `$`
    written as itself (systemd takes it literally in Environment=)."""
    _writable(f"the value of {name}", value)
    escaped = _specifiers(f"{name}={value}")
    if not any(c in escaped for c in " \t\"'\\"):
        return escaped
    return _quoted(escaped)


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
    if isinstance(timeout, float) and not math.isfinite(timeout):
        faults.append(
            f"{need.event}: timeout {timeout!r} is not a finite number of seconds (not "
            f"strict JSON either); write {need.timeout}"
        )
    elif not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
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
            f"{need.event}: timeout {_seconds(timeout)}s is shorter than cloudrunner needs "
            f"({need.timeout}s): {longest}"
        )
    if need.fail_closed and entry.get("failClosed") is not True:
        faults.append(
            f"{need.event}: not failClosed, but {need.fail_closed_by[0]} is: a client that "
            "cannot answer would let the event through"
        )
    return faults


def _seconds(value: float) -> str:
    """A number of seconds for a message (an integer too large for a float said so)."""
    if isinstance(value, int) and abs(value) >= 10**15:
        return f"{'-' if value < 0 else ''}(over 10^15)"
    return f"{value:g}"


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
    except (ValueError, RecursionError) as exc:  # a number of 4,300+ digits, deep nesting
        why = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise VmSetupError(f"{path} is not a hooks file cloudrunner can read: {why}") from None
