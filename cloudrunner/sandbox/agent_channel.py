"""The session agent's direct channel: a unix socket the host listens on, no engine between.

Over the container's attached stdin/stdout every request and answer passes through dockerd
and containerd-shim (about 0.5 ms and 0.36 ms of their CPU per hook). Instead, per agent
container, the worker makes a private directory (owned by root, mode 0700) holding a
listening socket (mode 0600), and bind-mounts the directory read-only at `CONTAINER_DIR`;
the agent, told the socket's path and a one-time token in its environment, connects and
says hello there (connect() works on a socket in a read-only mount). The host adopts one
connection only: one whose first frame is a hello with the token, from the init process of
a pid namespace other than the worker's (the peer's pid as the kernel recorded it, where
the worker can see it; `peer_problem`). Then it closes the listener and unlinks the
socket, so nothing can connect any more, and speaks the unchanged `framing` protocol on
the accepted connection. Any other connection is closed, noted and the wait goes on.

Who can reach it before then: on the host, root only (the directories are root's, 0700).
In the container, only the agent: a hook runs as an unprivileged uid with no capabilities,
so it cannot enter a root-owned 0700 directory (nor is any hook started before the hello).
The directory is removed with its container (`remove_directory`, also by the reaper).

Where the socket cannot work the attach stream stays the channel, and the sandbox's
attestation says so and why: gVisor (runsc) refuses connections to host sockets, a worker
that is not root makes directories the agent (uid 0 without CAP_DAC_OVERRIDE) may not
enter, a user-namespace-remapped engine shows the agent another owner, an engine on
another kernel cannot pass a socket at all.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import stat
import struct
import tempfile
from pathlib import Path
from typing import Any

from cloudrunner.sandbox import container_plan, framing
from cloudrunner.sandbox.agent_files import STAGE_DIR

#: the socket's name in its directory
SOCKET_NAME = "agent.sock"
#: where the directory is mounted (read-only) in the container
CONTAINER_DIR = "/opt/cloudrunner-channel"
CONTAINER_SOCKET = f"{CONTAINER_DIR}/{SOCKET_NAME}"
#: the directory under the state directory that holds one directory per agent container
ROOT_NAME = "sandbox-channels"
#: a directory made without a state directory (`SandboxSpec.agent_dir` None: the worker
#: runs on the engine's host) is a temporary one with this prefix
TEMP_PREFIX = "cloudrunner-channel-"
#: runtimes known to refuse a container's connect() to a host unix socket, and why
REFUSING_RUNTIMES = {
    "runsc": "gVisor (runtime runsc) does not let a container connect to a host unix socket",
}
_UCRED = struct.Struct("3i")


class ChannelUnavailable(Exception):
    """The socket channel cannot be set up here (the message says why)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def channel_root(agent_dir: Path | None) -> Path | None:
    """Where the per-container directories go: `<state_dir>/sandbox-channels` when
    `agent_dir` is the staged `<state_dir>/sandbox-agent/<digest>` (the engine sees the
    state directory at the same path), else None (a temporary directory on this host)."""
    if agent_dir is None or agent_dir.parent.name != STAGE_DIR:
        return None
    return agent_dir.parent.parent / ROOT_NAME


class Listener:
    """One agent container's private directory and listening socket."""

    def __init__(self, directory: Path, dir_fd: int, sock: socket.socket) -> None:
        self.directory = directory
        self._dir_fd = dir_fd
        self._sock = sock
        self.token = secrets.token_hex(16)

    @classmethod
    def open(cls, root: Path | None, name: str) -> Listener:
        """Make the directory (under `root`, or a temporary one) and listen in it."""
        if os.geteuid() != 0:
            raise ChannelUnavailable(
                f"the worker runs as uid {os.geteuid()}, not root: the agent (uid 0 without "
                "CAP_DAC_OVERRIDE) cannot enter a directory only that uid may enter"
            )
        try:
            if root is None:
                directory = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
            else:
                root.mkdir(mode=0o700, exist_ok=True)
                _check_private(root)
                directory = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=os.path.realpath(root)))
        except OSError as exc:
            raise ChannelUnavailable(
                f"cannot make the channel directory under {root or tempfile.gettempdir()}: "
                f"{exc.strerror or exc}"
            ) from None
        dir_fd = -1
        sock: socket.socket | None = None
        try:
            # Through the opened directory: no symlink is followed, and the path's length
            # does not meet the 107-byte limit of a socket address.
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            _check_private(directory, dir_fd)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            address = f"/proc/self/fd/{dir_fd}/{SOCKET_NAME}"
            sock.bind(address)
            os.chmod(SOCKET_NAME, 0o600, dir_fd=dir_fd, follow_symlinks=False)
            sock.listen(4)
        except (OSError, ChannelUnavailable) as exc:
            if sock is not None:
                sock.close()
            if dir_fd >= 0:
                os.close(dir_fd)
            remove_directory(directory)
            reason = exc.reason if isinstance(exc, ChannelUnavailable) else exc.strerror or exc
            raise ChannelUnavailable(
                f"cannot listen on a socket in {directory}: {reason}"
            ) from None
        return cls(directory, dir_fd, sock)

    def mount(self) -> container_plan.Mount:
        return container_plan.Mount(str(self.directory), CONTAINER_DIR, True)

    def env(self) -> dict[str, str]:
        """What the agent is told: the socket's path in the container and the token."""
        return {framing.CHANNEL_SOCKET_ENV: CONTAINER_SOCKET, framing.CHANNEL_TOKEN_ENV: self.token}

    def fileno(self) -> int:
        return self._sock.fileno()

    def accept(self) -> tuple[socket.socket, int, int]:
        """The next connection and its peer's pid (0 where this process cannot see it)
        and uid, as the kernel recorded them at connect()."""
        conn, _ = self._sock.accept()
        pid, uid, _gid = _UCRED.unpack(
            conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        )
        return conn, pid, uid

    def stop(self) -> None:
        """Accept nothing more: close the listening socket and unlink it."""
        self._sock.close()
        if self._dir_fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(SOCKET_NAME, dir_fd=self._dir_fd)
            os.close(self._dir_fd)
            self._dir_fd = -1

    def remove(self) -> None:
        """`stop`, and remove the directory."""
        self.stop()
        remove_directory(self.directory)


def check_hello(frame: framing.Frame, token: str) -> str:
    """Why `frame` is not the agent's hello with `token`, or "" when it is."""
    if frame.meta.get("op") != framing.OP_HELLO:
        return f"its first frame is {str(frame.meta.get('op'))[:40]!r}, not a hello"
    presented = frame.meta.get("token")
    if not isinstance(presented, str) or not secrets.compare_digest(presented, token):
        return "its hello does not carry the channel's token"
    return ""


def peer_problem(pid: int) -> str:
    """Why the peer process `pid` (as the kernel reported it at connect(); 0 when it is in
    a pid namespace this process cannot see) cannot be a container's agent, or "".

    The agent is the init process (pid 1) of its container's own pid namespace, nested in
    the one this process sees: its `NSpid` (pids from this /proc's namespace inwards) has
    more than one entry and ends in 1. That holds however the worker and the engine see
    pids (the engine's `State.Pid` is in its own namespace, which need not be the
    worker's), and needs no access to the process beyond its world-readable status.
    """
    if pid == 0:
        return ""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        return f"its process {pid} cannot be read ({exc.strerror or exc})"
    nspid = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")), None)
    if nspid is None:
        return ""  # a kernel without NSpid (before 4.1): the token decides
    if len(nspid) < 2 or nspid[-1] != "1":
        return f"its process {pid} is not the init process of a container's pid namespace"
    return ""


def _check_private(path: Path, fd: int | None = None) -> None:
    st = os.fstat(fd) if fd is not None else os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ChannelUnavailable(f"{path} is not a directory")
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise ChannelUnavailable(
            f"{path} is owned by uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):o}, "
            f"not by uid {os.geteuid()} with mode 700"
        )


def directory_of(container: dict[str, Any]) -> Path | None:
    """The host directory an inspected container has mounted as its channel, if any."""
    for mount in container.get("Mounts") or []:
        if mount.get("Destination") == CONTAINER_DIR and mount.get("Source"):
            return Path(str(mount["Source"]))
    return None


def remove_directory(directory: Path) -> bool:
    """Remove a channel directory: only a real directory named like one, and only when it
    holds nothing but (at most) the socket; whether it is gone."""
    name = directory.name
    if not (directory.parent.name == ROOT_NAME or name.startswith(TEMP_PREFIX)):
        return False
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    socket_path = directory / SOCKET_NAME
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.lstat(socket_path).st_mode):
            socket_path.unlink()
    try:
        directory.rmdir()
    except OSError:
        return False
    return True
