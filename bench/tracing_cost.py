"""Part 6: what tracing costs an event. Two daemons side by side, each with its warm `cat`
session hook: one as configured by default (tracing off), one sending every event's trace to
a collector on loopback started here (`[telemetry] otlp_endpoint`, the SDK's defaults for
batching); the same event is posted to each in turn, with the bare `sh -c cat` beside them,
so the three p50s are of one stretch of time. The traced daemon is stopped before the rows
are kept, and its spans must have reached the collector (else tracing was not on and the
rows would say nothing)."""

from __future__ import annotations

from functools import partial

import tomli_w

from bench.cases import CAT, EVENT
from bench.collector import Collector
from bench.daemon import DaemonProcess
from bench.fixtures import Scene
from bench.in_process import event
from bench.measure import time_interleaved
from bench.results import Report, Row
from bench.sandbox_modes import bare_key, run_bare

SECTION = "end_to_end"
OFF = "daemon request, tracing off"
ON = "daemon request, tracing on"
BARE = "bare, beside the tracing rows"


def measure(report: Report, worker: str, *, iterations: int) -> None:
    payload = event("bench-tracing")
    scenes: list[Scene] = []
    daemons: list[DaemonProcess] = []
    with Collector() as collector:
        try:
            off = Scene(f"{worker}-untraced", runtime="runc")
            scenes.append(off)
            on = Scene(f"{worker}-traced", runtime="runc")
            scenes.append(on)
            on.config.write_text(
                tomli_w.dumps({**on.settings_data(), "telemetry": {"otlp_endpoint": collector.url}})
            )
            for scene in scenes:
                daemons.append(DaemonProcess(scene))
            for scene in scenes:
                scene.settle()

            def post(daemon: DaemonProcess) -> None:
                status, answer = daemon.post(f"/v1/events/{EVENT}", payload)
                if status != 200 or answer.get("permission") != "allow":
                    raise RuntimeError(f"the daemon answered {status} {answer!r}")

            samples = time_interleaved(
                "part 6: daemon request with tracing off and on, bare cat",
                iterations,
                {OFF: partial(post, daemons[0]), ON: partial(post, daemons[1]),
                 BARE: partial(run_bare, CAT)},
                warmup=5,
            )  # fmt: skip
        finally:
            for daemon in daemons:
                daemon.close()  # the traced one sends what it still holds
            for scene in scenes:
                scene.close()
    if collector.requests == 0:
        raise RuntimeError("the traced daemon sent no span to the collector: tracing was not on")
    notes = {
        OFF: "POST from the bench process, warm `cat` session hook, tracing off (the default)",
        ON: "the same to a daemon tracing every event to a collector on loopback (OTLP/HTTP)",
        BARE: "`sh -c cat`, taken in turn with the two rows above",
    }
    exported = {"collector_requests": collector.requests, "collector_bytes": collector.bytes}
    for mode, taken in samples.items():
        report.add(
            Row(SECTION, CAT.name, mode, "runc", taken, bare_key(CAT), note=notes[mode],
                extra=exported if mode == ON else {})
        )  # fmt: skip
