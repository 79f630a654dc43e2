"""`cloudrunner serve` as a real process for the end-to-end tests, and the client beside it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudrunner.client import Endpoint, HttpReply, request

_READY = re.compile(r"cloudrunner: serving on (?P<where>.*) \(worker ")


@dataclass
class DaemonProcess:
    """A running daemon: its process, its socket, its TCP address if any, its stderr."""

    argv: list[str]
    env: dict[str, str]
    socket_path: Path
    proc: subprocess.Popen[bytes] | None = None
    tcp: tuple[str, int] | None = None
    stderr_lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    def start(self, timeout_s: float = 120.0) -> DaemonProcess:
        self.stderr_lines = []
        self.proc = subprocess.Popen(
            self.argv, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        ready = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                self.stderr_lines.append(line)
                match = _READY.search(line)
                if match:
                    tcp = re.search(r"http://([^ :]+):(\d+)", match.group("where"))
                    if tcp:
                        self.tcp = (tcp.group(1), int(tcp.group(2)))
                    ready.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout_s
        while not ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(
                    "the daemon did not start:\n" + "\n".join(self.stderr_lines[-30:])
                )
        return self

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(str(self.socket_path))

    def tcp_endpoint(self, token: str | None) -> Endpoint:
        assert self.tcp is not None
        return Endpoint(None, self.tcp[0], self.tcp[1], token)

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> HttpReply:
        data = (
            body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
        )
        return request(self.endpoint, method, path, data, **kwargs)

    def event(self, name: str, payload: dict[str, Any], session: str | None = None) -> HttpReply:
        path = f"/v1/sessions/{session}/events/{name}" if session else f"/v1/events/{name}"
        return self.call("POST", path, payload)

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM and wait; the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("the daemon did not stop within the timeout") from None
        if self._reader is not None:
            self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        if self._reader is not None:
            self._reader.join(5)


def daemon_process(
    flags: Sequence[str], *, state: Path, worker_id: str, env: dict[str, str] | None = None
) -> DaemonProcess:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    full_env = {**keep, "CLOUDRUNNER_WORKER_ID": worker_id, **(env or {})}
    argv = [sys.executable, "-m", "cloudrunner", "serve", *flags]
    return DaemonProcess(argv, full_env, state / "cloudrunner.sock")


def run_client(
    args: Sequence[str],
    payload: bytes | dict[str, Any],
    *,
    env: dict[str, str],
    timeout_s: float = 300,
) -> subprocess.CompletedProcess[bytes]:
    """`cloudrunner hook ...` as the separate process a cloud agent runs."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    keep = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    return subprocess.run(
        [sys.executable, "-m", "cloudrunner", *args], input=data, capture_output=True,
        env={**keep, **env}, timeout=timeout_s, check=False,
    )  # fmt: skip
