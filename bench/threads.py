"""The daemon's CPU per event, by thread: `python -m bench.threads [--sessions N] [--events N]`.

Starts the bench scene and `cloudrunner serve` as `python -m bench` does, sends trivial
events from N sessions back to back (part 3's load; `--kind` picks the `cat` hook, an event
no hook matches, or `GET /healthz`), and reads each of the daemon's threads' user and system
CPU from `/proc/PID/task/TID/stat` before and after; the threads are named from a
`py-spy dump` taken under the load (py-spy installed), else by their id. A thread that ended
during the run is not counted. This is the figure to split the daemon's CPU by: a sampling
profiler's `--gil` view credits the event loop with the time it sits idle after it last held
the interpreter lock.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.cases import EVENT
from bench.daemon import DaemonProcess
from bench.end_to_end import NO_HOOK_EVENT, no_hook_event
from bench.fixtures import Scene, worker_id
from bench.in_process import event
from cloudrunner import client


def _ticks(pid: int) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except OSError:
            continue
        out[int(tid)] = (int(fields[11]), int(fields[12]))
    return out


def _names(pid: int) -> dict[int, str]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return {}
    dump = subprocess.run(
        [spy, "dump", "--pid", str(pid)], capture_output=True, text=True, check=False
    ).stdout
    found = {int(m[1]): m[2] for m in re.finditer(r'Thread (\d+) .*?"([^"]+)"', dump)}
    # one line per kind of thread: cloudrunner-event-3 and -7 are both event threads
    return {tid: re.sub(r"-[0-9a-f]{6,}.*|-\d+$", "", name) for tid, name in found.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.threads", description=__doc__)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--events", type=int, default=800, help="in all, over the sessions")
    parser.add_argument("--kind", choices=("hook", "no-hook", "healthz"), default="hook")
    args = parser.parse_args(argv)
    scene = Scene(worker_id(), runtime="runc")
    try:
        daemon = DaemonProcess(scene)
        try:
            scene.settle()
            per = max(1, args.events // args.sessions)
            path = f"/v1/events/{NO_HOOK_EVENT if args.kind == 'no-hook' else EVENT}"
            make = no_hook_event if args.kind == "no-hook" else event
            payloads = [make(f"bench-threads-{i}") for i in range(args.sessions)]
            for payload in payloads:  # warm: each conversation's sandbox
                daemon.post(path, payload)

            def send(payload: bytes) -> None:
                for _ in range(per):
                    if args.kind == "healthz":
                        client.request(daemon.endpoint, "GET", "/healthz", timeout_s=60)
                    else:
                        daemon.post(path, payload)

            senders = [threading.Thread(target=send, args=(p,)) for p in payloads]
            before = _ticks(daemon.pid)
            started = time.perf_counter()
            for sender in senders:
                sender.start()
            names = _names(daemon.pid)
            for sender in senders:
                sender.join()
            elapsed = time.perf_counter() - started
            after = _ticks(daemon.pid)
        finally:
            daemon.close()
    finally:
        scene.close()
    total = per * args.sessions
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    spent: collections.Counter[tuple[str, int]] = collections.Counter()
    for tid, (user, system) in after.items():
        user0, system0 = before.get(tid, (0, 0))
        name = names.get(tid, f"thread {tid}")
        spent[(name, 0)] += user - user0
        spent[(name, 1)] += system - system0
    print(f"{args.kind}, {args.sessions} sessions: {total / elapsed:.0f} events/s")
    whole = 0.0
    for name in sorted({key[0] for key in spent}):
        user, system = spent[(name, 0)] * tick_ms / total, spent[(name, 1)] * tick_ms / total
        whole += user + system
        if user + system:
            print(f"  {name:32s} {user:.3f} user + {system:.3f} system ms/event")
    print(f"  {'all threads':32s} {whole:.3f} ms/event")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
