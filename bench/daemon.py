"""`cloudrunner serve` as a child process of the run, and its resident memory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from bench.fixtures import Scene
from bench.waiting import came_true
from cloudrunner import client


def cloudrunner_command() -> list[str]:
    """The installed `cloudrunner` script next to this interpreter (what agents call)."""
    script = Path(sys.executable).with_name("cloudrunner")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cloudrunner"]


def compiled_client() -> Path:
    """The compiled per-event client next to this interpreter (scripts/setup builds it), or
    the binary named by CLOUDRUNNER_BENCH_HOOK_BINARY (to time another build of it)."""
    override = os.environ.get("CLOUDRUNNER_BENCH_HOOK_BINARY", "")
    binary = Path(override) if override else Path(sys.executable).with_name("cloudrunner-hook")
    if not binary.is_file() or not os.access(binary, os.X_OK):
        where = "CLOUDRUNNER_BENCH_HOOK_BINARY names" if override else "scripts/setup builds"
        raise RuntimeError(
            f"{binary} is missing or not executable; {where} the compiled client "
            "(bash client/build --host FILE builds one)"
        )
    return binary


class DaemonProcess:
    """A running daemon for one scene; `close()` stops it with SIGTERM (drain) and waits."""

    def __init__(self, scene: Scene, start_timeout_s: float = 60.0) -> None:
        self.scene = scene
        self.endpoint = client.Endpoint(str(scene.socket))
        self._stderr = open(scene.root / "serve.log", "wb")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [*cloudrunner_command(), "serve"],
            env=scene.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
        )

        def answers() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cloudrunner serve exited: {self.log_tail()}")
            try:
                return client.request(self.endpoint, "GET", "/healthz", timeout_s=5).status == 200
            except client.Unreachable:
                return False

        if not came_true(answers, timeout_s=start_timeout_s, interval_s=0.05):
            self.close()
            raise RuntimeError(f"cloudrunner serve did not answer: {self.log_tail()}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def post(self, path: str, body: bytes) -> tuple[int, Any]:
        reply = client.request(self.endpoint, "POST", path, body, timeout_s=120)
        return reply.status, json.loads(reply.body) if reply.body else None

    def get(self, path: str) -> int:
        return client.request(self.endpoint, "GET", path, timeout_s=120).status

    def delete(self, path: str) -> int:
        return client.request(self.endpoint, "DELETE", path, timeout_s=120).status

    def log_tail(self) -> str:
        self._stderr.flush()
        try:
            return (self.scene.root / "serve.log").read_text(errors="replace")[-800:]
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (the peak so far) of a process, in KiB."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0])
    except (OSError, ValueError):
        pass
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and all its threads so far (0.0 if gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    # after the command: state is field 3, utime 14 and stime 15 (1-based, man 5 proc)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssSampler:
    """The largest VmRSS seen while it runs (sampled every 20 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kib = memory_kib(pid).get("VmRSS", 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak_kib = max(self.peak_kib, memory_kib(self.pid).get("VmRSS", 0))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_kib = max(self.peak_kib, memory_kib(self.pid).get("VmRSS", 0))


def hook_env(scene: Scene) -> dict[str, str]:
    """The per-event client's environment: only where the daemon listens."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    return {**keep, "CLOUDRUNNER_SOCKET": str(scene.socket)}
