"""Flame graphs of the daemon under part 3's load: `python -m bench.flame OUT_DIR`.

Starts the bench scene and `cloudrunner serve` as `python -m bench` does, keeps N sessions
(default 8) sending trivial events back to back, and records the daemon with py-spy twice
meanwhile: once by wall-clock time (every thread, idle ones too: where an event waits) and
once `--gil` (only the thread holding the GIL: where the daemon's CPU goes). Writes
`OUT_DIR/wall.svg` and `OUT_DIR/gil.svg`, and prints events/s and the daemon's CPU per event
of each recording. Needs py-spy (`pip install py-spy`) and permission to ptrace the daemon.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.cases import EVENT
from bench.daemon import DaemonProcess, cpu_seconds
from bench.fixtures import Scene, worker_id
from bench.in_process import event


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.flame", description=__doc__)
    parser.add_argument("out", type=Path, help="where wall.svg and gil.svg go")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=12.0, help="each recording's length")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument(
        "--format",
        default="flamegraph",
        choices=("flamegraph", "raw"),
        help="raw: collapsed stacks (.txt) instead of SVGs",
    )
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("bench.flame: py-spy is not installed (pip install py-spy)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = ".txt" if args.format == "raw" else ".svg"
    scene = Scene(worker_id(), runtime="runc")
    try:
        daemon = DaemonProcess(scene)
        try:
            scene.settle()
            load = _Load(daemon, args.sessions)
            load.start()
            try:
                for name, extra in (("wall", ["--idle"]), ("gil", ["--gil"])):
                    events, cpu = load.count, cpu_seconds(daemon.pid)
                    started = time.monotonic()
                    subprocess.run(
                        [spy, "record", "--pid", str(daemon.pid), "--rate", str(args.rate),
                         "--duration", str(int(args.seconds)), "--format", args.format,
                         "--output", str(args.out / (name + suffix)), "--threads", *extra],
                        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    )  # fmt: skip
                    n = load.count - events
                    took = time.monotonic() - started
                    used = (cpu_seconds(daemon.pid) - cpu) * 1000
                    print(
                        f"{name}: {n / took:.0f} events/s, daemon CPU {used / max(n, 1):.2f} "
                        f"ms/event (under py-spy, {args.sessions} sessions)"
                    )
            finally:
                load.stop()
        finally:
            daemon.close()
    finally:
        scene.close()
    if load.errors:
        print(f"bench.flame: {len(load.errors)} events failed: {load.errors[0]}", file=sys.stderr)
        return 1
    return 0


class _Load:
    """`sessions` threads sending trivial events back to back until stopped."""

    def __init__(self, daemon: DaemonProcess, sessions: int) -> None:
        self.daemon = daemon
        self.payloads = [event(f"bench-flame-{i}") for i in range(sessions)]
        self.count = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._send, args=(p,), daemon=True) for p in self.payloads
        ]

    def start(self) -> None:
        for payload in self.payloads:  # each conversation starts its sandbox first
            self.daemon.post(f"/v1/events/{EVENT}", payload)
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _send(self, payload: bytes) -> None:
        while not self._stop.is_set():
            status, answer = self.daemon.post(f"/v1/events/{EVENT}", payload)
            if status != 200 or not isinstance(answer, dict):
                self.errors.append(f"{status} {answer!r}")
                return
            self.count += 1  # one writer per thread; a lost update only miscounts


if __name__ == "__main__":
    raise SystemExit(main())
