"""The two per-event clients side by side: the Python `cloudrunner hook` and the compiled
`cloudrunner-hook`, both as installed in the virtualenv, run as the separate processes a
cloud agent starts; and small fake daemons (real servers on unix sockets) for the faults a
real daemon does not show on demand."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.support.daemon_process import DaemonProcess

BIN = Path(sys.executable).parent
CLIENTS = {"python": BIN / "cloudrunner", "compiled": BIN / "cloudrunner-hook"}
#: the compiled client's sources (a binary older than them is stale)
SOURCES = Path(__file__).resolve().parents[2] / "client"


@dataclass(frozen=True)
class Outcome:
    """What a client gave: its exit code, stdout and stderr."""

    code: int
    stdout: bytes
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stderr.splitlines()


def missing_client() -> str | None:
    """Why a client cannot run here (None when both are installed)."""
    for name, path in CLIENTS.items():
        if not os.access(path, os.X_OK):
            return f"the {name} client {path} is missing; run `bash scripts/setup`"
    built = CLIENTS["compiled"].stat().st_mtime
    for source in (*SOURCES.glob("*.go"), SOURCES / "go.mod"):
        if source.stat().st_mtime > built:
            return (
                f"{CLIENTS['compiled']} is older than {source}; run `bash scripts/setup` "
                "to rebuild it"
            )
    return None


def run_one(
    client: str,
    args: Sequence[str],
    payload: bytes | None,
    env: dict[str, str],
    *,
    stdin: str = "pipe",
    cwd: Path | None = None,
) -> Outcome:
    """One client process: `payload` on stdin (None: an empty stdin); or stdin "closed" (no
    descriptor 0 at all, as an agent that closed it before starting the client), or a
    "write-only" (a descriptor open for writing only: it cannot be read)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    argv = [str(CLIENTS[client]), *args]
    if stdin == "closed":
        argv = ["sh", "-c", 'exec "$0" "$@" <&-', *argv]
    if stdin == "write-only":
        argv = ["sh", "-c", 'exec "$0" "$@" 0>/dev/null', *argv]
    proc = subprocess.run(
        argv, input=payload or b"", capture_output=True, env={**keep, **env}, timeout=300,
        check=False, cwd=cwd,
    )  # fmt: skip
    return Outcome(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))


def run_both(
    args: Sequence[str],
    payload: bytes | None,
    env: dict[str, str] | None = None,
    *,
    stdin: str = "pipe",
    cwd: Path | None = None,
) -> Outcome:
    """Both clients on the same input; any difference in exit code, stdout or stderr fails."""
    python = run_one("python", args, payload, env or {}, stdin=stdin, cwd=cwd)
    compiled = run_one("compiled", args, payload, env or {}, stdin=stdin, cwd=cwd)
    assert compiled == python, (
        f"the clients differ on {list(args)}:\n python:   {python}\n compiled: {compiled}"
    )
    return python


class FakeDaemon:
    """A server on a unix socket that reads a request's head and then, per connection:
    answers `reply` (raw bytes) and closes, or closes at once (reply b""), or holds the
    connection open without a word (hang) until stopped."""

    def __init__(self, path: Path, reply: bytes = b"", *, hang: bool = False) -> None:
        self.path = path
        self.reply = reply
        self.hang = hang
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(16)
        self._stop = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            conn.settimeout(10)
            with contextlib.suppress(OSError):
                _read_request(conn)  # all of it: unread bytes would make close() a reset
            if self.hang:
                self._held.append(conn)
                continue
            with contextlib.suppress(OSError):
                conn.sendall(self.reply)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        # close() alone does not wake a thread blocked in accept(); shutdown() does
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for conn in self._held:
            conn.close()
        self._thread.join(10)
        self.path.unlink(missing_ok=True)


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return data


@contextlib.contextmanager
def fake_daemon(path: Path, reply: bytes = b"", *, hang: bool = False) -> Iterator[FakeDaemon]:
    server = FakeDaemon(path, reply, hang=hang)
    try:
        yield server
    finally:
        server.close()


def http_answer(status: str, body: bytes) -> bytes:
    """A whole HTTP/1.1 answer, as the daemon sends it."""
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body


def shell_event_through_both(daemon: DaemonProcess, workspace: Path) -> Outcome:
    """One `beforeShellExecution` of `ls` in `workspace`, sent by both clients to `daemon`,
    which is stopped afterwards, whatever happens."""
    payload = {
        "hook_event_name": "beforeShellExecution", "conversation_id": "c1",
        "generation_id": "g1", "cursor_version": "1.7.0",
        "workspace_roots": [str(workspace)], "command": "ls", "cwd": str(workspace),
    }  # fmt: skip
    try:
        return run_both(
            ["hook", "beforeShellExecution"], json.dumps(payload).encode(),
            {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)},
        )  # fmt: skip
    finally:
        daemon.stop()
