"""Where a warm event's CPU goes, stage by stage: `python -m bench.stages [--events N]`.

A worker in this process with a warm session pool (as the daemon holds one) answers the
bench's trivial event again and again, first with its `cat` hook, then an event no hook
matches; each stage of the event path is wrapped to add up its own thread's CPU time
(`time.thread_time`, user and system), so the figures hold on a busy machine better than
wall-clock time does. Stages nest (`handle` holds all the others, `_admit` holds
`load_sources`, ...). No HTTP: the daemon's front and its hand-over to an event thread are
not in these figures (part 2 of `python -m bench` times them).
"""

from __future__ import annotations

import argparse
import collections
import functools
import resource
import time
from collections.abc import Callable
from typing import Any

from bench.cases import EVENT
from bench.end_to_end import NO_HOOK_EVENT, no_hook_event
from bench.fixtures import Scene, worker_id
from bench.in_process import PooledWorker, event
from cloudrunner.audit import writer
from cloudrunner.docker_engine import connect
from cloudrunner.event import intake, pipeline, record_builders, sandboxes
from cloudrunner.sandbox import session_sandbox

_SPENT: dict[str, float] = collections.defaultdict(float)


def _wrap(owner: Any, attribute: str, label: str) -> None:
    inner: Callable[..., Any] = getattr(owner, attribute)

    @functools.wraps(inner)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            _SPENT[label] += time.thread_time() - started

    setattr(owner, attribute, timed)


def _instrument(worker: PooledWorker) -> None:
    pipe = worker.worker.pipeline
    for owner, attribute in (
        (pipeline.EventPipeline, "handle"),
        (pipeline.EventPipeline, "_admit"),
        (pipeline.EventPipeline, "_append_first"),
        (pipeline.EventPipeline, "_prepare"),
        (pipeline.EventPipeline, "_write"),
        (pipeline, "run_plan"),
        (pipeline, "merge"),
        (pipeline, "load_sources"),
        (pipeline, "build_plan"),
        (intake, "read"),
        (record_builders.HookRecords, "build"),
        (sandboxes.EngineSandboxes, "open"),
        (session_sandbox.SessionSandbox, "run"),
        (writer._AuditLogger, "audit"),
    ):
        _wrap(owner, attribute, f"{getattr(owner, '__name__', owner)}.{attribute}")
    for attribute in ("resolve", "gate"):
        _wrap(pipe.workspaces, attribute, f"workspaces.{attribute}")
    _wrap(pipe.sessions, "load", "sessions.load")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stages", description=__doc__)
    parser.add_argument("--events", type=int, default=400, help="events of each kind")
    args = parser.parse_args(argv)
    client = connect()
    scene = Scene(worker_id(), runtime="runc")
    pooled = PooledWorker(scene, client)
    try:
        _instrument(pooled)
        cases = (
            (f"{EVENT}, one `cat` hook", event("bench-stages-1"), EVENT),
            (f"{NO_HOOK_EVENT}, no hook", no_hook_event("bench-stages-2"), NO_HOOK_EVENT),
        )
        for title, payload, name in cases:
            pooled.worker.handle(payload, name)  # warm: the sandbox, the caches
            scene.settle()
            _SPENT.clear()
            before = resource.getrusage(resource.RUSAGE_SELF)
            for _ in range(args.events):
                pooled.worker.handle(payload, name)
            after = resource.getrusage(resource.RUSAGE_SELF)
            user = (after.ru_utime - before.ru_utime) * 1000 / args.events
            system = (after.ru_stime - before.ru_stime) * 1000 / args.events
            print(f"{title}: process CPU {user:.3f} user + {system:.3f} system ms/event")
            for label, spent in sorted(_SPENT.items(), key=lambda item: -item[1]):
                print(f"  {label:42s} {spent * 1000 / args.events:.3f} ms/event")
    finally:
        pooled.close()
        scene.close()
        client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
