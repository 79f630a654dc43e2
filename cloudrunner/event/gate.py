"""The writability gate (spec section 7): no hooks load or run until the workspace is writable.

A cloud agent may begin in a read-only environment. The gate is open when the workspace is
really writable, which only a real write can tell: permission bits say nothing about a
read-only mount, and root passes every permission check but still gets EROFS. So the probe
creates, writes, fsyncs and removes a uniquely named file in the workspace root, as the
hook user (a worker running as root would pass where hooks fail).

The operator can also hold the gate: the mode persisted in the state directory is `auto`
(follow the probe; the default), `open` (hooks run whatever the probe says) or `closed`
(nothing runs). The state file is replaced atomically under an exclusive lock, so several
worker processes sharing one state directory always read a whole, current state.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from cloudrunner.errors import CloudrunnerError
from cloudrunner.sandbox.owner import checkout_owner

STATE_FILE = "gate.json"
LOCK_FILE = "gate.lock"
PROBE_PREFIX = ".cloudrunner-write-probe-"
STATE_DIR_ENV = "CLOUDRUNNER_STATE_DIR"


class GateError(CloudrunnerError):
    """The gate's state cannot be read or written."""


class GateMode(StrEnum):
    AUTO = "auto"
    OPEN = "open"
    CLOSED = "closed"


@dataclass(frozen=True)
class ProbeResult:
    """Whether a file could really be written in `path`; `detail` says why not."""

    path: Path
    writable: bool
    detail: str


@dataclass(frozen=True)
class GateState:
    """The persisted mode; `generation` grows by one on every change, across processes."""

    mode: GateMode
    generation: int
    changed_at: str | None
    changed_by: str | None


@dataclass(frozen=True)
class GateDecision:
    """What the gate says for one event: `open` means hooks may load and run."""

    open: bool
    mode: GateMode
    probe: ProbeResult | None
    reason: str
    generation: int


# --------------------------------------------------------------------------- probe


def probe_writable(workspace: Path, as_user: tuple[int, int] | None = None) -> ProbeResult:
    """Create, write, fsync and remove a uniquely named file in `workspace`.

    `as_user` (uid, gid): probe as that user, with no supplementary groups, as hooks run
    (a worker running as root would pass every permission check). Needs root when it is not
    the worker's own uid; without it the probe runs as the worker and says so.
    Never raises for an unwritable workspace: that is a result, not an error.
    """
    if as_user is not None and as_user[0] != os.geteuid():
        if os.geteuid() == 0:
            return _probe_as(workspace, as_user)
        own = probe_writable(workspace)
        return ProbeResult(
            workspace,
            own.writable,
            f"{own.detail} (as the worker's uid {os.geteuid()}: it cannot switch to the "
            f"hook uid {as_user[0]} to probe as hooks run)",
        )
    name = f"{PROBE_PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
    target = workspace / name
    if not workspace.is_dir():
        return ProbeResult(workspace, False, "the workspace directory does not exist")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags, 0o600)
    except OSError as exc:
        return ProbeResult(workspace, False, _describe(exc, "create a file"))
    failure: str | None = None
    try:
        try:
            os.write(fd, b"cloudrunner write probe\n")
            # fsync: a full disk or a failing device may only report at flush time.
            os.fsync(fd)
        except OSError as exc:
            failure = _describe(exc, "write and flush a file")
        finally:
            os.close(fd)
    finally:
        try:
            os.unlink(target)
        except FileNotFoundError:
            pass
        except OSError as exc:
            failure = failure or _describe(exc, f"remove the probe file {name}")
    if failure is not None:
        return ProbeResult(workspace, False, failure)
    return ProbeResult(workspace, True, "a file was created, written, flushed and removed")


def _probe_as(workspace: Path, user: tuple[int, int]) -> ProbeResult:
    """The probe in a forked child that has become `user` (no exec: the worker's Python
    need not be executable by the hook uid). The child makes only system calls and ends
    with `os._exit`, so the fork is safe in the threaded daemon."""
    uid, gid = user
    who = f"the hook user {uid}:{gid}"
    name = f"{PROBE_PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
    try:
        dir_fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return ProbeResult(workspace, False, _describe(exc, "open the workspace directory"))
    try:
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
    except OSError as exc:
        os.close(dir_fd)
        return ProbeResult(workspace, False, _describe(exc, "start the probe"))
    try:
        try:
            pid = os.fork()
        except OSError as exc:
            return ProbeResult(workspace, False, _describe(exc, f"start the probe as {who}"))
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            _child_probe(dir_fd, name, user, write_end)
        os.close(write_end)
        write_end = -1
        chunks = []
        while chunk := os.read(read_end, 4096):
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
        os.close(dir_fd)
    line = b"".join(chunks).decode("utf-8", "replace")
    if line == "ok":
        return ProbeResult(workspace, True, f"{who} created, wrote, flushed and removed a file")
    step, _, rest = line.partition("\t")
    number, _, text = rest.partition("\t")
    if not number.isdigit():
        return ProbeResult(
            workspace, False, f"the probe as {who} ended without an answer (status {status})"
        )
    code = errno.errorcode.get(int(number), "error")
    return ProbeResult(workspace, False, f"{who} cannot {step}: {text} ({code})")


def _child_probe(dir_fd: int, name: str, user: tuple[int, int], out: int) -> None:
    answer = "ok"
    step = "become the hook user"
    try:
        os.setgroups([])
        os.setresgid(user[1], user[1], user[1])
        os.setresuid(user[0], user[0], user[0])
        step = "create a file"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        try:
            step = "write and flush a file"
            os.write(fd, b"cloudrunner write probe\n")
            os.fsync(fd)
        except OSError as exc:
            answer = f"{step}\t{exc.errno}\t{exc.strerror}"
        os.close(fd)
        step = f"remove the probe file {name}"
        os.unlink(name, dir_fd=dir_fd)
    except OSError as exc:
        answer = answer if answer != "ok" else f"{step}\t{exc.errno}\t{exc.strerror}"
    except BaseException:
        answer = "error"
    try:
        os.write(out, answer.encode("utf-8", "replace"))
    finally:
        os._exit(0)


def _describe(exc: OSError, what: str) -> str:
    code = errno.errorcode.get(exc.errno or 0, "error")
    return f"cannot {what}: {exc.strerror or exc} ({code})"


# --------------------------------------------------------------------------- state


def _state_path(state_dir: Path) -> Path:
    return state_dir / STATE_FILE


def read_state(state_dir: Path) -> GateState:
    """The persisted state; a state directory without one is in `auto` mode."""
    path = _state_path(state_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return GateState(GateMode.AUTO, 0, None, None)
    except OSError as exc:
        raise GateError(f"cannot read gate state {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
        mode = GateMode(data["mode"])
        generation = int(data.get("generation", 0))
    except (ValueError, KeyError, TypeError) as exc:
        raise GateError(
            f"gate state {path} is damaged ({exc.__class__.__name__}: {exc}); "
            "set it again with `cloudrunner gate open|close|auto --state-dir "
            f"{state_dir}`"
        ) from None
    return GateState(mode, generation, data.get("changed_at"), data.get("changed_by"))


@contextlib.contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise GateError(
            f"cannot use state directory {state_dir}: {exc.strerror}; give a writable --state-dir"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def set_mode(state_dir: Path, mode: GateMode) -> GateState:
    """Persist `mode`; safe when several processes change and read it at once."""
    with _locked(state_dir):
        current = read_state(state_dir) if _state_path(state_dir).exists() else None
        state = GateState(
            mode=mode,
            generation=(current.generation if current else 0) + 1,
            changed_at=datetime.now(UTC).isoformat(timespec="seconds"),
            changed_by=f"pid {os.getpid()} on {socket.gethostname()}",
        )
        _write_atomically(
            _state_path(state_dir),
            {
                "mode": state.mode.value,
                "generation": state.generation,
                "changed_at": state.changed_at,
                "changed_by": state.changed_by,
            },
        )
    return state


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise GateError(f"cannot write gate state {path}: {exc.strerror}") from None


# --------------------------------------------------------------------------- decision


def evaluate(
    workspace: Path,
    state_dir: Path,
    *,
    known_writable: bool = False,
    as_user: tuple[int, int] | None = None,
) -> GateDecision:
    """The gate for the next event: call once per event, before any hooks file is read.

    `closed` skips the probe (nothing may touch the workspace); `open` and `auto` probe,
    so the decision and the audit record always say what the workspace really is.
    `known_writable`: this process saw the workspace writable under the same gate state
    (a long-lived worker), so the probe is skipped: hooks start when the environment
    becomes writable (spec section 7), and an environment does not go back to read-only.
    `as_user`: the hook uid/gid the probe writes as (see `probe_writable`).
    """
    state = read_state(state_dir)
    if state.mode is GateMode.CLOSED:
        return GateDecision(False, state.mode, None, "the gate is held closed", state.generation)
    if known_writable:
        return GateDecision(
            True,
            state.mode,
            None,
            "the workspace was found writable earlier (not probed again)",
            state.generation,
        )
    probe = probe_writable(workspace, as_user)
    if state.mode is GateMode.OPEN:
        reason = "the gate is held open"
        if not probe.writable:
            reason += f" (the workspace is not writable: {probe.detail})"
        return GateDecision(True, state.mode, probe, reason, state.generation)
    if probe.writable:
        return GateDecision(True, state.mode, probe, "the workspace is writable", state.generation)
    return GateDecision(
        False,
        state.mode,
        probe,
        f"the workspace is not writable yet: {probe.detail}",
        state.generation,
    )


def default_hook_user(workspace: Path) -> tuple[int, int] | None:
    """Who hooks run as without a profile `user`: the checkout's owner, never 0 (see
    `sandbox.owner`; None when the workspace cannot be read: the probe then says why)."""
    try:
        return checkout_owner(workspace)
    except OSError:
        return None
