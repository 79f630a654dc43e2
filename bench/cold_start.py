"""Part 5: from a new session (the workspace already checked out) to the first hook's answer:
the session container starts, its agent says hello, the hook runs. Each iteration is a new
conversation, whose warm sandbox is closed after its first answer."""

from __future__ import annotations

import json

import docker

from bench.cases import CAT, EVENT
from bench.daemon import DaemonProcess
from bench.fixtures import Scene
from bench.in_process import PooledWorker, event
from bench.measure import Stopwatch
from bench.results import Report, Row
from bench.sandbox_modes import bare_key

SECTION = "cold_start"


def measure(
    report: Report,
    client: docker.DockerClient,
    *,
    worker: str,
    iterations: int,
    runtime: str = "runc",
) -> None:
    scene = Scene(worker, runtime=runtime)
    try:
        with PooledWorker(scene, client) as pooled:
            pooled.answer(event("bench-cold-warmup"))  # the worker's own first-use costs
            pooled.pool.close_session("bench-cold-warmup")
            samples = []
            for i in range(iterations):
                conversation = f"bench-cold-{i}"
                clock = Stopwatch()
                pooled.answer(event(conversation))
                samples.append(clock.ms)
                pooled.pool.close_session(conversation)
            report.add(
                Row(
                    SECTION,
                    CAT.name,
                    "new session, in-process worker",
                    runtime,
                    samples,
                    bare_key(CAT),
                    note="container start + agent hello + first hook",
                )
            )
    finally:
        scene.close()


def measure_daemon(report: Report, daemon: DaemonProcess, *, iterations: int, runtime: str) -> None:
    """The same through the daemon's API: POST /v1/sessions for the workspace, then its
    first event; the session is deleted (with its sandbox) after each answer."""
    workspace = json.dumps({"workspace": str(daemon.scene.workspace)}).encode()
    payload = event("bench-cold-api")
    samples = []
    for _ in range(iterations):
        clock = Stopwatch()
        status, created = daemon.post("/v1/sessions", workspace)
        if status != 201:
            raise RuntimeError(f"POST /v1/sessions answered {status} {created!r}")
        session = created["session"]
        status, answer = daemon.post(f"/v1/sessions/{session}/events/{EVENT}", payload)
        samples.append(clock.ms)
        if status != 200 or answer.get("permission") != "allow":
            raise RuntimeError(f"the new session's first event answered {status} {answer!r}")
        daemon.delete(f"/v1/sessions/{session}")
    report.add(
        Row(
            SECTION,
            CAT.name,
            "new session, daemon API",
            runtime,
            samples,
            bare_key(CAT),
            note="POST /v1/sessions + first event",
        )
    )
