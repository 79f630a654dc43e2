"""Part 1: each hook as a bare host subprocess, a plain `docker run` (docker SDK, same image,
no hardening), `hook` isolation and warm `session` isolation, per runtime."""

from __future__ import annotations

import logging
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docker

from bench.cases import CASES, PATH, PAYLOAD, HookCase
from bench.measure import time_calls
from bench.results import Report, Row
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox import (
    ExecRequest,
    HookContainerSandbox,
    SandboxLabels,
    SandboxProfile,
    SandboxSpec,
    SessionSandbox,
)
from cloudrunner.sandbox.base import WORKER_LABEL

log = logging.getLogger("bench")
SECTION = "sandbox"


@dataclass(frozen=True)
class Counts:
    bare: int
    container: int
    session: int


class HookFailed(RuntimeError):
    """A measured hook did not answer as expected: its figure would mean nothing."""


def bare_key(case: HookCase, section: str = SECTION) -> str:
    return f"{section}/{case.name}/bare/host"


def run_bare(case: HookCase) -> None:
    proc = subprocess.run(
        ["/bin/sh", "-c", case.command], input=PAYLOAD, capture_output=True, env={"PATH": PATH}
    )
    if proc.stdout != case.expected:
        raise HookFailed(f"bare {case.name}: {proc.stdout!r} {proc.stderr!r}")


def measure_bare(report: Report, counts: Counts, cases: tuple[HookCase, ...] = CASES) -> None:
    for case in cases:

        def once(c: HookCase = case) -> None:
            run_bare(c)

        samples = time_calls(f"bare {case.name}", counts.bare, once, 10)
        report.add(Row(SECTION, case.name, "bare", "host", samples, note="subprocess on the host"))


def measure_runtime(
    report: Report,
    client: docker.DockerClient,
    *,
    image: str,
    runtime: str,
    worker: str,
    counts: Counts,
    cases: tuple[HookCase, ...] = CASES,
) -> None:
    workspace = Path(tempfile.mkdtemp(prefix="cloudrunner-bench-sandbox-"))
    workspace.chmod(0o755)  # root owns it: hooks run as uid 10001 and must enter it
    spec = SandboxSpec(
        workspace,
        SandboxLabels(worker, f"bench-sandbox-{runtime}", "project"),
        SandboxProfile(image=image, runtime=runtime),
    )
    try:
        for case in cases:
            base = bare_key(case)
            request = ExecRequest(case.command, str(workspace), PAYLOAD, {}, 60)

            def docker_run(c: HookCase = case) -> None:
                # `run` cannot feed stdin: the event goes in through the environment. The
                # trailing newline is there because the engine's log copier may drop a last
                # line that has none when the container ends (seen with `cat` here).
                out = client.containers.run(
                    image,
                    ["sh", "-c", f'printf %s "$EVENT" | {c.command}; echo'],
                    environment={"EVENT": PAYLOAD.decode()},
                    runtime=runtime,
                    network_mode="none",
                    labels={WORKER_LABEL: worker},
                    remove=True,
                )
                if out.rstrip(b"\n") != c.expected.rstrip(b"\n"):
                    raise HookFailed(f"docker run {c.name}: {out!r}")

            report.add(
                Row(
                    SECTION,
                    case.name,
                    "docker run",
                    runtime,
                    time_calls(f"docker run {case.name} {runtime}", counts.container, docker_run),
                    base,
                    note="plain SDK containers.run, network none, no hardening",
                )
            )
            with HookContainerSandbox(spec, client) as hook:
                report.add(
                    Row(
                        SECTION,
                        case.name,
                        "hook",
                        runtime,
                        time_calls(
                            f"hook {case.name} {runtime}",
                            counts.container,
                            _checked(hook.run, request, case),
                        ),
                        base,
                        note="a hardened container per run",
                    )
                )
            with SessionSandbox(spec, client) as session:
                report.add(
                    Row(
                        SECTION,
                        case.name,
                        "session",
                        runtime,
                        time_calls(
                            f"session {case.name} {runtime}",
                            counts.session,
                            _checked(session.run, request, case),
                            warmup=5,
                        ),
                        base,
                        note="warm container, in-container agent",
                    )
                )
    finally:
        workspace.rmdir()


def _checked(
    run: Callable[[ExecRequest], object], request: ExecRequest, case: HookCase
) -> Callable[[], None]:
    def once() -> None:
        result = run(request)
        outcome = getattr(result, "outcome", None)
        stdout = getattr(result, "stdout", b"")
        if outcome is not Outcome.OK or stdout != case.expected:
            raise HookFailed(f"{case.name}: {outcome} {getattr(result, 'message', '')} {stdout!r}")

    return once
