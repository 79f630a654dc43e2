"""Part 2: one event end to end, as an agent VM sees it: the per-event `cloudrunner hook`
client process with the daemon up, and `cloudrunner run` (a process that does everything in
process: settings, workspace, a session container started and removed, the hook, audit).
The daemon's HTTP request made from this process shows what the client's start-up adds."""

from __future__ import annotations

import json
import subprocess
import sys

from bench.cases import CAT, EVENT
from bench.daemon import DaemonProcess, cloudrunner_command, hook_env
from bench.fixtures import Scene
from bench.in_process import event
from bench.measure import time_calls
from bench.results import Report, Row
from bench.sandbox_modes import bare_key

SECTION = "end_to_end"


def _check(stdout: bytes, what: str) -> None:
    answer = json.loads(stdout)
    if answer.get("permission") != "allow":
        raise RuntimeError(f"{what} answered {answer!r}")


def measure_daemon(
    report: Report, daemon: DaemonProcess, *, client_iterations: int, runtime: str
) -> None:
    scene = daemon.scene
    payload = event("bench-e2e")
    argv = [*cloudrunner_command(), "hook", EVENT]
    env = hook_env(scene)

    # The same client without pip's console script, whose template imports `re` (with enum,
    # functools, ...) before cloudrunner's code runs: what a leaner launcher would save.
    direct = [sys.executable, "-I", "-c",
              "import sys; from cloudrunner.cli import main; sys.exit(main(sys.argv[1:]))",
              "hook", EVENT]  # fmt: skip

    def client(command: list[str] = argv) -> None:
        proc = subprocess.run(command, input=payload, capture_output=True, env=env, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"cloudrunner hook failed: {proc.stderr.decode()[-400:]}")
        _check(proc.stdout, "cloudrunner hook")

    def hook_client() -> None:
        client(argv)

    def hook_client_direct() -> None:
        client(direct)

    def http_request() -> None:
        status, answer = daemon.post(f"/v1/events/{EVENT}", payload)
        if status != 200 or answer.get("permission") != "allow":
            raise RuntimeError(f"the daemon answered {status} {answer!r}")

    report.add(
        Row(
            SECTION,
            CAT.name,
            "hook client, daemon up",
            runtime,
            time_calls("cloudrunner hook", client_iterations, hook_client, warmup=3),
            bare_key(CAT),
            note="process start + unix socket + warm session",
        )
    )
    report.add(
        Row(SECTION, CAT.name, "hook client, no console script", runtime,
            time_calls("python -I -c cloudrunner.cli hook", client_iterations,
                       hook_client_direct, warmup=3),
            bare_key(CAT), note="python -I -c 'from cloudrunner.cli import main; ...'")
    )  # fmt: skip
    interpreter = [sys.executable, "-I", "-S", "-c", "pass"]

    def interpreter_only() -> None:
        subprocess.run(interpreter, check=True)

    report.add(
        Row(SECTION, CAT.name, "python start-up only", runtime,
            time_calls("python -I -S -c pass", client_iterations, interpreter_only, warmup=3),
            bare_key(CAT), note="the floor of any Python client: `python -I -S -c pass`")
    )  # fmt: skip
    report.add(
        Row(
            SECTION,
            CAT.name,
            "daemon HTTP request only",
            runtime,
            time_calls("daemon request", client_iterations, http_request, warmup=3),
            bare_key(CAT),
            note="from the bench process: no client start-up",
        )
    )


def measure_run(report: Report, scene: Scene, *, iterations: int, runtime: str) -> None:
    payload = event("bench-run")
    argv = [*cloudrunner_command(), "run", "--event", EVENT]
    env = scene.env()

    def run_once() -> None:
        proc = subprocess.run(argv, input=payload, capture_output=True, env=env, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"cloudrunner run failed: {proc.stderr.decode()[-400:]}")
        _check(proc.stdout, "cloudrunner run")

    report.add(
        Row(
            SECTION,
            CAT.name,
            "cloudrunner run (in-process)",
            runtime,
            time_calls("cloudrunner run", iterations, run_once, warmup=1),
            bare_key(CAT),
            note="a process per event; starts and removes its session container",
        )
    )
