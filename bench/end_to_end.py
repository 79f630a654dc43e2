"""Part 2: one event end to end, as an agent VM sees it: the per-event client process with
the daemon up (the Python `cloudrunner hook` and the compiled `cloudrunner-hook`), and
`cloudrunner run` (a process that does everything in process: settings, workspace, a
session container started and removed, the hook, audit). The daemon's HTTP request made
from this process shows what the client's start-up adds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial

from bench.cases import CAT, EVENT
from bench.daemon import DaemonProcess, cloudrunner_command, compiled_client, hook_env
from bench.fixtures import Scene
from bench.in_process import event
from bench.measure import time_calls, time_interleaved
from bench.results import Report, Row
from bench.sandbox_modes import bare_key, run_bare

SECTION = "end_to_end"


def _check(stdout: bytes, what: str) -> None:
    answer = json.loads(stdout)
    if answer.get("permission") != "allow":
        raise RuntimeError(f"{what} answered {answer!r}")


#: the row modes of part 2's interleaved measurement (the summary and targets read them)
CLIENT = "hook client, daemon up"
COMPILED = "compiled client, daemon up"
CLIENT_IS = "hook client, python -IS"
DIRECT = "hook client, no console script"
INTERPRETER = "python start-up only"
REQUEST = "daemon HTTP request only"
BARE = "bare, beside the daemon"
SYNC = "one audit fdatasync"
#: where the daemon's answer goes: its HTTP front alone, then an event no hook matches
FRONT = "daemon HTTP front only"
NO_HOOK = "daemon event, no hook matches"

#: an event the bench workspace has no hook for: the whole event path but the sandbox
NO_HOOK_EVENT = "afterShellExecution"


def measure_daemon(
    report: Report, daemon: DaemonProcess, *, client_iterations: int, runtime: str
) -> None:
    """The client as installed, the same file run by `python3 -IS`, the interpreter alone,
    the daemon's answer alone and the bare hook, taken in turn (one of each, again and
    again), so the differences between them hold even on a busy machine."""
    scene = daemon.scene
    payload = event("bench-e2e")
    argv = [*cloudrunner_command(), "hook", EVENT]
    env = hook_env(scene)
    # The installed launcher run with -IS: no site (its .pth files), no environment paths.
    isolated = [sys.executable, "-IS", argv[0], "hook", EVENT] if len(argv) == 3 else argv
    # The client imported from `python -I -c` (site loaded): what the launcher file adds.
    direct = [sys.executable, "-I", "-c",
              "import sys; from cloudrunner.cli import main; sys.exit(main(sys.argv[1:]))",
              "hook", EVENT]  # fmt: skip
    interpreter = [sys.executable, "-I", "-S", "-c", "pass"]
    compiled = [str(compiled_client()), "hook", EVENT]

    def client(command: list[str]) -> None:
        proc = subprocess.run(command, input=payload, capture_output=True, env=env, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"cloudrunner hook failed: {proc.stderr.decode()[-400:]}")
        _check(proc.stdout, "cloudrunner hook")

    def interpreter_only() -> None:
        subprocess.run(interpreter, check=True)

    # Every event's answer waits for two syncs of the audit log (its `received` record
    # before any hook runs, its decision after): the floor under the daemon's overhead on
    # this disk, measured beside the rows above on a file in the same state directory.
    sync_fd = os.open(scene.state / "bench-fdatasync", os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def audit_sync() -> None:
        os.write(sync_fd, b"x" * 600 + b"\n")
        os.fdatasync(sync_fd)

    def http_request() -> None:
        status, answer = daemon.post(f"/v1/events/{EVENT}", payload)
        if status != 200 or answer.get("permission") != "allow":
            raise RuntimeError(f"the daemon answered {status} {answer!r}")

    def front_only() -> None:
        status = daemon.get("/healthz")
        if status != 200:
            raise RuntimeError(f"the daemon answered {status} to /healthz")

    no_hook_payload = no_hook_event("bench-e2e")

    def no_hook() -> None:
        status, answer = daemon.post(f"/v1/events/{NO_HOOK_EVENT}", no_hook_payload)
        if status != 200 or answer != {}:
            raise RuntimeError(f"the daemon answered {status} {answer!r} to a hookless event")

    try:
        samples = time_interleaved(
            "part 2: client, compiled client, client -IS, client -I -c, interpreter, daemon "
            "request, bare cat, fdatasync",
            client_iterations,
            {
                CLIENT: partial(client, argv),
                COMPILED: partial(client, compiled),
                CLIENT_IS: partial(client, isolated),
                DIRECT: partial(client, direct),
                INTERPRETER: interpreter_only,
                REQUEST: http_request,
                BARE: partial(run_bare, CAT),
                SYNC: audit_sync,
                FRONT: front_only,
                NO_HOOK: no_hook,
            },
            warmup=3,
        )
    finally:
        os.close(sync_fd)
        (scene.state / "bench-fdatasync").unlink(missing_ok=True)
    notes = {
        CLIENT: "`cloudrunner hook` as installed: process start + unix socket + warm session",
        COMPILED: "`cloudrunner-hook hook` (Go, static): process start + socket + warm session",
        CLIENT_IS: "the same launcher as `python3 -IS cloudrunner hook` (no site)",
        DIRECT: "python -I -c 'from cloudrunner.cli import main; ...'",
        INTERPRETER: "the floor of any Python client: `python -I -S -c pass`",
        REQUEST: "from the bench process: no client start-up",
        BARE: "`sh -c cat`, taken in turn with the rows above",
        SYNC: "write + fdatasync of a line in the state directory (an event waits for two)",
        FRONT: "GET /healthz from the bench process: the HTTP front, answered on its loop",
        NO_HOOK: f"POST {NO_HOOK_EVENT} (no hook for it): an event without the sandbox, one sync",
    }
    for mode, taken in samples.items():
        report.add(Row(SECTION, CAT.name, mode, runtime, taken, bare_key(CAT), note=notes[mode]))


def no_hook_event(conversation: str) -> bytes:
    """A valid `NO_HOOK_EVENT` payload in `conversation`."""
    return json.dumps(
        {
            "hook_event_name": NO_HOOK_EVENT,
            "command": "ls -la",
            "output": "",
            "duration": 1,
            "cwd": "/tmp",
            "conversation_id": conversation,
        }
    ).encode()


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
