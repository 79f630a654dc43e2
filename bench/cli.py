"""`python -m bench`: every part in one run, one table, a JSON file and an SVG chart.

    python -m bench [--smoke] [--out DIR] [--runtime runc --runtime runsc] [--part N ...]

Parts: 1 sandbox modes, 2 end to end, 3 throughput, 4 scaling, 5 cold start, 6 tracing
(a daemon with tracing off and one tracing to a collector on loopback). `--smoke` runs a few
iterations of each part on runc only: it checks that the benchmark works, its figures mean
nothing.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import docker

from bench import (
    chart,
    cold_start,
    end_to_end,
    sandbox_modes,
    scaling,
    summary,
    table,
    targets,
    throughput,
    tracing_cost,
)
from bench.cases import CASES, CAT
from bench.daemon import DaemonProcess
from bench.fixtures import Scene, worker_id
from bench.results import Report
from bench.sandbox_modes import Counts
from cloudrunner.docker_engine import connect
from cloudrunner.images import DEFAULT_RUNTIME_IMAGE
from cloudrunner.logs import configure_logging

log = logging.getLogger("bench")
PARTS = (1, 2, 3, 4, 5, 6)


@dataclass(frozen=True)
class Plan:
    bare: int
    container: int
    container_runsc: int
    session: int
    session_runsc: int
    client: int
    run: int
    throughput_events: int
    throughput_levels: tuple[int, ...]
    scaling: int
    cold: int


FULL = Plan(
    bare=200,
    container=15,
    container_runsc=8,
    session=200,
    session_runsc=60,
    client=100,
    run=6,
    throughput_events=320,
    throughput_levels=(1, 8, 32),
    scaling=40,
    cold=8,
)
SMOKE = Plan(
    bare=5,
    container=2,
    container_runsc=1,
    session=5,
    session_runsc=3,
    client=3,
    run=1,
    throughput_events=8,
    throughput_levels=(1, 4),
    scaling=2,
    cold=1,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a few iterations of each part, runc only (checks the benchmark)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("bench-results"),
        metavar="DIR",
        help="where bench.json and bench.svg go (default: ./bench-results)",
    )
    parser.add_argument(
        "--runtime",
        action="append",
        dest="runtimes",
        choices=["runc", "runsc"],
        help="part 1's runtimes (default: runc, and runsc when registered)",
    )
    parser.add_argument(
        "--part",
        action="append",
        type=int,
        dest="parts",
        choices=PARTS,
        help="run only these parts (repeatable; default: all)",
    )
    parser.add_argument("--image", default=DEFAULT_RUNTIME_IMAGE, help="the hook runtime image")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging()  # the sandboxes' own log: warnings only, as in the worker
    logging.basicConfig(level=logging.INFO, format="bench: %(message)s", stream=sys.stderr)
    plan = SMOKE if args.smoke else FULL
    parts = set(args.parts or PARTS)
    client = connect()
    try:
        runtimes = args.runtimes or _default_runtimes(client, smoke=args.smoke)
        report = Report(_meta(args, plan, runtimes, client))
        started = time.monotonic()
        _run(report, client, plan, parts, runtimes, args.image)
        report.meta["wall_s"] = round(time.monotonic() - started, 1)
        report.meta["loadavg_end"] = list(os.getloadavg())
    finally:
        client.close()
    report.targets = targets.evaluate(report)
    report.meta["figures"] = summary.figures(report)
    args.out.mkdir(parents=True, exist_ok=True)
    report.write_json(args.out / "bench.json")
    chart.write_chart(report, args.out / "bench.svg")
    print(table.render(report))
    print(
        f"\nwall time {report.meta['wall_s']} s; wrote {args.out / 'bench.json'} and "
        f"{args.out / 'bench.svg'}"
    )
    for error in report.meta["errors"]:
        print(f"bench: error: {error}", file=sys.stderr)
    return 1 if report.meta["errors"] else 0


def _run(
    report: Report,
    client: docker.DockerClient,
    plan: Plan,
    parts: set[int],
    runtimes: list[str],
    image: str,
) -> None:
    """Every part asked for; a part that fails is recorded in meta.errors and the others
    still run (the run then exits 1)."""
    worker = worker_id()
    errors: list[str] = report.meta.setdefault("errors", [])

    def attempt(what: str, measure: Callable[[], None]) -> None:
        try:
            measure()
        except Exception as exc:  # recorded and reported: one broken part spoils no other
            log.error("%s failed: %s", what, exc)
            errors.append(f"{what}: {exc}")

    # Every row compares with a bare subprocess of the same run: always measured first.
    counts = {
        "runc": Counts(plan.bare, plan.container, plan.session),
        "runsc": Counts(plan.bare, plan.container_runsc, plan.session_runsc),
    }
    sandbox_modes.measure_bare(report, counts["runc"], CASES if 1 in parts else (CAT,))
    if 1 in parts:
        for runtime in runtimes:
            attempt(
                f"part 1 ({runtime})",
                partial(sandbox_modes.measure_runtime, report, client, image=image,
                        runtime=runtime, worker=worker, counts=counts[runtime]),
            )  # fmt: skip
    if parts & {2, 3, 5}:
        scene = Scene(worker, runtime="runc")
        try:
            daemon: DaemonProcess | None = None
            try:
                daemon = DaemonProcess(scene)
            except Exception as exc:
                errors.append(f"cloudrunner serve did not start: {exc}")
            if daemon is not None:
                scene.settle()
                try:
                    if 2 in parts:
                        attempt("part 2 (client)", partial(
                            end_to_end.measure_daemon, report, daemon,
                            client_iterations=plan.client, runtime="runc"))  # fmt: skip
                    if 3 in parts:
                        attempt("part 3", partial(
                            throughput.measure, report, daemon,
                            events_per_level=plan.throughput_events, runtime="runc",
                            levels=plan.throughput_levels))  # fmt: skip
                    if 5 in parts:
                        attempt("part 5 (daemon)", partial(
                            cold_start.measure_daemon, report, daemon, iterations=plan.cold,
                            runtime="runc"))  # fmt: skip
                finally:
                    daemon.close()
            if 2 in parts:
                attempt("part 2 (run)", partial(
                    end_to_end.measure_run, report, scene, iterations=plan.run,
                    runtime="runc"))  # fmt: skip
        finally:
            scene.close()
    if 4 in parts:
        attempt("part 4", partial(scaling.measure, report, client, worker=worker,
                                  iterations=plan.scaling))  # fmt: skip
    if 5 in parts:
        attempt("part 5 (in process)", partial(cold_start.measure, report, client,
                                               worker=worker, iterations=plan.cold))  # fmt: skip
    if 6 in parts:
        attempt("part 6 (tracing)", partial(tracing_cost.measure, report, worker,
                                            iterations=plan.session))  # fmt: skip
    report.rows.sort(key=lambda row: _SECTION_ORDER.index(row.section))


_SECTION_ORDER = ["sandbox", "end_to_end", "throughput", "scaling", "cold_start"]


def _default_runtimes(client: docker.DockerClient, *, smoke: bool) -> list[str]:
    if smoke:
        return ["runc"]
    registered = client.info().get("Runtimes") or {}
    return ["runc", "runsc"] if "runsc" in registered else ["runc"]


def _meta(
    args: argparse.Namespace, plan: Plan, runtimes: list[str], client: docker.DockerClient
) -> dict[str, object]:
    version = client.version()
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "smoke": bool(args.smoke),
        "runtimes": runtimes,
        "image": args.image,
        "iterations": asdict(plan),
        "host": {
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "python": platform.python_version(),
            "docker": version.get("Version"),
        },
        "loadavg_start": list(os.getloadavg()),
    }
