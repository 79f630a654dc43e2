"""Five node hooks on one event through a warm session sandbox, against the same five run
bare one after another on the host (issue 16: parallel hooks must not be slower).

    .venv/bin/python -m bench.parallel_cpu [--events 15] [--hooks 5]

Each hook is `node .cursor/hooks/hN.js`: it reads the event from stdin, parses it, loads a
few core modules and hashes for about 20 ms of CPU, then prints `{}` (the shape of a real
guard: start-up, parse, a little work). Rows (p50 and p90 over `--events` events, after two
warm-up events): bare sequential on the host; the event through an in-process worker with a
warm pool (as the daemon runs it) with the session container's quota at 1 CPU (what every
session container had before) and at the default (`cpus` x `max_parallel_hooks`, capped at
the machine's cores). Containers carry `cloudrunner.worker=bench-parallel-<pid>` and are
removed at the end, whatever happens.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cloudrunner.sandbox.limits import machine_cores
from cloudrunner.sandbox.session_pool import SessionPool
from cloudrunner.settings import load_settings
from cloudrunner.worker import Worker

HOOK = """\
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const event = JSON.parse(fs.readFileSync(0, "utf8"));
let digest = path.basename(event.file_path || "x");
const until = Date.now() + 20;
while (Date.now() < until) {
  digest = crypto.createHash("sha256").update(digest).digest("hex");
}
process.stdout.write("{}\\n");
"""


def _repo(base: Path, hooks: int) -> Path:
    ws = base / "repo"
    (ws / ".cursor" / "hooks").mkdir(parents=True)
    for n in range(hooks):
        (ws / ".cursor" / "hooks" / f"h{n}.js").write_text(HOOK)
    commands = [{"command": f"node .cursor/hooks/h{n}.js"} for n in range(hooks)]
    (ws / ".cursor" / "hooks.json").write_text(
        json.dumps({"version": 1, "hooks": {"afterFileEdit": commands}})
    )
    (ws / "a.txt").write_text("a\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=ws, check=True)
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@e.invalid", "commit", "-qm", "b"],
        cwd=ws,
        check=True,
    )
    return ws


def _payload(ws: Path) -> bytes:
    return json.dumps(
        {
            "hook_event_name": "afterFileEdit",
            "conversation_id": "bench",
            "generation_id": "g",
            "cursor_version": "1.7.0",
            "workspace_roots": [str(ws)],
            "file_path": str(ws / "a.txt"),
            "edits": [],
        }
    ).encode()


def _interleaved(
    calls: list[Callable[[], None]], events: int, warmed: Callable[[], None]
) -> list[list[float]]:
    """Milliseconds per call, the calls taken in turn `events` times after two warm-ups
    (then `warmed()` is called)."""
    for _ in range(2):
        for call in calls:
            call()
    warmed()
    out: list[list[float]] = [[] for _ in calls]
    for _ in range(events):
        for row, call in zip(out, calls, strict=True):
            started = time.perf_counter()
            call()
            row.append((time.perf_counter() - started) * 1000)
    return out


def _bare(ws: Path, payload: bytes, hooks: int) -> None:
    for n in range(hooks):
        subprocess.run(
            ["/bin/sh", "-c", f"node .cursor/hooks/h{n}.js"],
            cwd=ws,
            input=payload,
            capture_output=True,
            check=True,
        )


def _throttled_ns(pool: SessionPool) -> int | None:
    """CFS throttled time (ns) of the pool's session containers so far (cgroup v1 or v2;
    None when the engine's cgroups are not visible here). Unlike wall time, this does not
    depend on what else the machine runs: it is the time the quota held the hooks back."""
    total, seen = 0, False
    for entry in list(pool._entries.values()):
        cid = entry.sandbox.container_id
        if cid is None:
            continue
        for path in (
            f"/sys/fs/cgroup/cpu/docker/{cid}/cpu.stat",
            f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat",
        ):
            try:
                text = Path(path).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "throttled_time":  # v1: ns
                    total, seen = total + int(value), True
                elif key == "throttled_usec":  # v2: us
                    total, seen = total + int(value) * 1000, True
            break
    return total if seen else None


def _through_worker(ws: Path, state: Path, session_cpus: float | None) -> Worker:
    overrides: dict[str, object] = {
        "state_dir": state,
        "worker_id": f"bench-parallel-{os.getpid()}",
        "sources.enterprise_hooks": state / "none.json",
        "workspace.path": ws,
        "sandbox.isolation": "session",
        "sandbox.limits.session_cpus": session_cpus,
    }
    settings = load_settings(environ={}, overrides=overrides)
    return Worker(settings, pool=SessionPool())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.parallel_cpu")
    parser.add_argument("--events", type=int, default=15)
    parser.add_argument("--hooks", type=int, default=5)
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="cloudrunner-parallel-"))
    workers: list[Worker] = []
    pools: list[SessionPool] = []
    labels = ["bare, one after another", "session, quota 1 CPU (before)", "session, default quota"]
    try:
        ws = _repo(base, args.hooks)
        payload = _payload(ws)
        calls: list[Callable[[], None]] = [lambda: _bare(ws, payload, args.hooks)]
        for n, cpus in enumerate((1.0, None)):
            worker = _through_worker(ws, base / f"state-{n}", cpus)
            workers.append(worker)
            if worker._pool is not None:
                pools.append(worker._pool)

            def one(worker: Worker = worker) -> None:
                reply = worker.handle(payload)
                bad = [o for o in reply.outcomes if o[1] != "ok"]
                if bad:
                    raise SystemExit(f"a hook did not run cleanly: {bad}")

            calls.append(one)
        before: list[int | None] = []

        def warmed() -> None:
            before.extend(_throttled_ns(pool) for pool in pools)

        # interleaved, so a change in the machine's load touches every row alike
        times = _interleaved(calls, args.events, warmed)
        throttled = [
            None if start is None or (end := _throttled_ns(pool)) is None else end - start
            for start, pool in zip(before, pools, strict=True)
        ]
    finally:
        for worker in workers:
            worker.close()
        for pool in pools:
            pool.close()
        shutil.rmtree(base, ignore_errors=True)
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    print(
        f"{args.hooks} node hooks on one event, {args.events} events, {machine_cores()} cores, "
        f"host node {node.stdout.strip()}"
    )
    print(f"{'':34} {'p50 ms':>8} {'p90 ms':>8} {'x bare':>7} {'throttled ms/event':>19}")
    bare = statistics.median(times[0])
    for n, (label, row) in enumerate(zip(labels, times, strict=True)):
        p50 = statistics.median(row)
        p90 = statistics.quantiles(row, n=10)[-1]
        held = throttled[n - 1] if n else None
        shown = "-" if held is None else f"{held / 1e6 / args.events:.1f}"
        print(f"{label:34} {p50:8.1f} {p90:8.1f} {p50 / bare:7.2f} {shown:>19}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
