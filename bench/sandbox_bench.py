"""Sandbox latency for a trivial hook (`cat`), side by side in one run.

    .venv/bin/python bench/sandbox_bench.py [--iterations 300] [--hook-iterations 40]
        [--runtime runc|runsc] [--image IMAGE]

Prints p50/p99 (milliseconds) for: a bare subprocess (`/bin/sh -c cat` on the host),
a plain `docker run` of the same image without any hardening (the reference for hook
mode), `hook` isolation and warm `session` isolation, with ratios to bare and the session
overhead over bare. DESIGN.md targets: session within 3 ms of bare at p50 and 10 ms at
p99; hook mode within 1.2x of a plain docker run. Run it at a quiet moment: on a shared
machine other work moves the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cloudrunner.docker_engine import connect
from cloudrunner.images import DEFAULT_RUNTIME_IMAGE
from cloudrunner.logs import configure_logging
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox import (
    ExecRequest,
    HookContainerSandbox,
    SandboxLabels,
    SandboxProfile,
    SandboxSpec,
    SessionSandbox,
)

PAYLOAD = b'{"hook_event_name":"beforeShellExecution","command":"ls"}'


def measure(name: str, n: int, once: Callable[[], None], warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        once()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        once()
        samples.append((time.perf_counter() - start) * 1000)
    print(f"  {name}: {n} runs done", file=sys.stderr, flush=True)
    return samples


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


def main() -> int:
    configure_logging()  # the sandbox's own log to stderr at warning, as in the worker
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300, help="bare and session runs")
    parser.add_argument("--hook-iterations", type=int, default=40, help="container runs")
    parser.add_argument("--runtime", default="runc")
    parser.add_argument("--image", default=DEFAULT_RUNTIME_IMAGE)
    args = parser.parse_args()

    client = connect()
    workspace = Path(tempfile.mkdtemp(prefix="cloudrunner-bench-"))
    workspace.chmod(0o755)  # root owns it, so hooks run as uid 10001 and need to enter it
    spec = SandboxSpec(
        workspace,
        SandboxLabels(f"bench-{os.getpid()}", "bench", "project"),
        SandboxProfile(image=args.image, runtime=args.runtime),
    )
    request = ExecRequest("cat", str(workspace), PAYLOAD, {}, 30)

    def bare() -> None:
        proc = subprocess.run(["/bin/sh", "-c", "cat"], input=PAYLOAD, capture_output=True)
        assert proc.stdout == PAYLOAD

    def plain_docker_run() -> None:
        out = client.containers.run(
            args.image, ["sh", "-c", "echo x"], remove=True, runtime=args.runtime
        )
        assert out == b"x\n"

    results: dict[str, list[float]] = {}
    print(f"benchmarking on {args.runtime} with {args.image}", file=sys.stderr)
    results["bare subprocess"] = measure("bare", args.iterations, bare, warmup=10)
    results["plain docker run"] = measure("docker run", args.hook_iterations, plain_docker_run)
    with HookContainerSandbox(spec, client) as hook:

        def hook_once() -> None:
            result = hook.run(request)
            assert result.outcome is Outcome.OK and result.stdout == PAYLOAD, result.message

        results["hook mode"] = measure("hook", args.hook_iterations, hook_once)
    with SessionSandbox(spec, client) as session:

        def session_once() -> None:
            result = session.run(request)
            assert result.outcome is Outcome.OK and result.stdout == PAYLOAD, result.message

        results["session mode"] = measure("session", args.iterations, session_once, warmup=10)
    client.close()
    workspace.rmdir()

    bare_p50, bare_p99 = p50(results["bare subprocess"]), p99(results["bare subprocess"])
    print(f"\ntrivial hook `cat`, runtime {args.runtime}, milliseconds")
    print(f"{'mode':<18}{'n':>5}{'p50':>10}{'p99':>10}{'p50/bare':>10}{'p99/bare':>10}")
    for name, samples in results.items():
        print(
            f"{name:<18}{len(samples):>5}{p50(samples):>10.2f}{p99(samples):>10.2f}"
            f"{p50(samples) / bare_p50:>10.1f}{p99(samples) / bare_p99:>10.1f}"
        )
    session = results["session mode"]
    print(
        f"\nsession - bare: p50 {p50(session) - bare_p50:+.2f} ms (target <= 3), "
        f"p99 {p99(session) - bare_p99:+.2f} ms (target <= 10)"
    )
    print(
        "hook mode / plain docker run, p50: "
        f"{p50(results['hook mode']) / p50(results['plain docker run']):.2f}x (target <= 1.2)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
