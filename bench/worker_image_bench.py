"""The worker image under load, for sizing: per-event client latency, throughput over
concurrent conversations, and the worker's resident memory with its warm sandboxes.

    bash scripts/build-worker-image            # cloudrunner/worker:latest
    .venv/bin/python bench/worker_image_bench.py [--image TAG] [--sessions 8] [--events 25]

Runs the image as deploy/compose.yaml does (the host's socket, identical paths, the demo
repository as a local origin), sends `beforeShellExecution` events that run the project's
guard hook through `cloudrunner hook` processes on the host, and removes everything after.
Numbers only; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import docker.errors

from bench.waiting import came_true

ROOT = Path(__file__).resolve().parents[1]
WORKER_UID = 10010


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@example.invalid", *args],
        cwd=cwd, check=True, capture_output=True,
    )  # fmt: skip


def _prepare(base: Path) -> dict[str, Path]:
    src = base / "src"
    shutil.copytree(ROOT / "examples" / "demo-repo", src)
    _git(src, "init", "-q", "-b", "main")
    _git(src, "add", "-A")
    _git(src, "commit", "-q", "-m", "demo")
    origin = base / "origin.git"
    _git(base, "clone", "-q", "--bare", str(src), str(origin))
    enterprise = base / "enterprise"
    shutil.copytree(ROOT / "examples" / "enterprise", enterprise)
    state = base / "state"
    state.mkdir()
    for directory, _, files in os.walk(base):
        os.chown(directory, WORKER_UID, WORKER_UID)
        for name in files:
            os.chown(os.path.join(directory, name), WORKER_UID, WORKER_UID)
    base.chmod(0o755)
    return {"origin": origin, "enterprise": enterprise, "state": state, "ws": base / "ws"}


def _hook(socket: Path, payload: dict[str, Any]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "hook", payload["hook_event_name"],
         "--socket", str(socket)],
        input=json.dumps(payload).encode(), capture_output=True, check=False, timeout=300,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    if proc.returncode != 0 or proc.stderr:
        raise SystemExit(f"bench: the event failed: {proc.stderr.decode()}")
    return elapsed


def _worker_rss_kib(container: Any) -> int:
    script = (
        "import os\n"
        "for p in os.listdir('/proc'):\n"
        "    if p.isdigit():\n"
        "        try: cmd = open(f'/proc/{p}/cmdline','rb').read()\n"
        "        except OSError: continue\n"
        "        if b'serve' in cmd and b'tini' not in cmd:\n"
        "            print([l for l in open(f'/proc/{p}/status') if l.startswith('VmRSS')][0])\n"
    )
    code, out = container.exec_run(["python3", "-c", script])
    if code != 0:
        raise SystemExit(f"bench: cannot read the worker's memory: {out.decode()}")
    return int(out.decode().split()[1])


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="cloudrunner/worker:latest")
    parser.add_argument("--sessions", type=int, default=8, help="concurrent conversations")
    parser.add_argument("--events", type=int, default=25, help="events per conversation")
    args = parser.parse_args()

    client = docker.from_env(timeout=300)
    worker_id = f"bench-{uuid.uuid4().hex[:10]}"
    base = Path(tempfile.mkdtemp(prefix="cloudrunner-bench-", dir="/tmp"))
    paths = _prepare(base)
    sock = Path("/var/run/docker.sock")
    container = client.containers.run(
        args.image, detach=True, name=f"cloudrunner-worker-{worker_id}",
        labels={"cloudrunner.worker": worker_id}, group_add=[str(sock.stat().st_gid)],
        read_only=True, tmpfs={"/tmp": "size=64m"}, cap_drop=["ALL"],
        volumes={str(sock): {"bind": str(sock), "mode": "rw"},
                 str(base): {"bind": str(base), "mode": "rw"}},
        environment={
            "CLOUDRUNNER_STATE_DIR": str(paths["state"]), "CLOUDRUNNER_WORKER_ID": worker_id,
            "CLOUDRUNNER_REPO": paths["origin"].as_uri(), "CLOUDRUNNER_REF": "main",
            "CLOUDRUNNER_WORKSPACE": str(paths["ws"]),
            "CLOUDRUNNER_ENTERPRISE_HOOKS": str(paths["enterprise"] / "hooks.json"),
        },
    )  # fmt: skip
    socket = paths["state"] / "cloudrunner.sock"
    try:
        if not came_true(socket.exists, timeout_s=120, interval_s=0.2):
            raise SystemExit(f"bench: the worker did not start:\n{container.logs().decode()}")
        idle_rss = _worker_rss_kib(container)

        def event(conversation: int, n: int) -> dict[str, Any]:
            return {
                "hook_event_name": "beforeShellExecution", "conversation_id": f"c{conversation}",
                "generation_id": f"g{n}", "command": f"rm build-{n}.log", "cwd": "/",
                "workspace_roots": [str(paths["ws"])],
            }  # fmt: skip

        # warm-up: one event per conversation (clone, sandbox start)
        for c in range(args.sessions):
            _hook(socket, event(c, 0))
        warm_rss = _worker_rss_kib(container)
        sequential = [_hook(socket, event(0, n)) for n in range(1, args.events + 1)]
        # the floor: an event whose command no hook's matcher selects (no hook runs)
        no_hook = []
        for n in range(1, args.events + 1):
            payload = event(0, 500 + n)
            payload["command"] = "ls"
            no_hook.append(_hook(socket, payload))

        latencies: list[float] = []
        lock = threading.Lock()

        def conversation(c: int) -> None:
            for n in range(1, args.events + 1):
                elapsed = _hook(socket, event(c, 1000 + n))
                with lock:
                    latencies.append(elapsed)

        threads = [threading.Thread(target=conversation, args=(c,)) for c in range(args.sessions)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        loaded_rss = _worker_rss_kib(container)
        labelled = client.containers.list(filters={"label": f"cloudrunner.worker={worker_id}"})
        warm = [c for c in labelled if c.id != container.id]
        print(f"worker image {args.image}, {args.sessions} conversations x {args.events} events")
        print(f"one client at a time: p50 {_pct(sequential, 0.5):.1f} ms, "
              f"p99 {_pct(sequential, 0.99):.1f} ms (hook process start + answer)")  # fmt: skip
        print(f"no hook selected: p50 {_pct(no_hook, 0.5):.1f} ms, "
              f"p99 {_pct(no_hook, 0.99):.1f} ms")  # fmt: skip
        print(f"{args.sessions} concurrent: {len(latencies) / wall:.1f} events/s, "
              f"p50 {_pct(latencies, 0.5):.1f} ms, p99 {_pct(latencies, 0.99):.1f} ms, "
              f"mean {statistics.mean(latencies) * 1000:.1f} ms")  # fmt: skip
        print(f"worker RSS: idle {idle_rss / 1024:.1f} MiB, {len(warm)} warm sandboxes "
              f"{warm_rss / 1024:.1f} MiB, after the load {loaded_rss / 1024:.1f} MiB")  # fmt: skip
    finally:
        container.stop(timeout=60)
        container.remove(force=True)
        for leftover in client.containers.list(
            all=True, filters={"label": f"cloudrunner.worker={worker_id}"}
        ):
            leftover.remove(force=True)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
