"""Part 4: one event with 1, 4 and 16 matching hooks in one source, and 4 and 16 spread over
the three sources (enterprise, team, project: tiers run one after the other, the hooks of a
tier side by side, `max_parallel_hooks` at a time). Warm session mode, trivial hooks."""

from __future__ import annotations

import docker

from bench.cases import CAT
from bench.fixtures import Scene
from bench.in_process import PooledWorker, event
from bench.measure import time_calls
from bench.results import Report, Row
from bench.sandbox_modes import bare_key

SECTION = "scaling"
ONE_SOURCE = (1, 4, 16)
THREE_SOURCES = (4, 16)


def spread(n: int) -> tuple[int, int, int]:
    """n hooks over enterprise, team and project, as evenly as they go."""
    base, extra = divmod(n, 3)
    return base + (extra > 0), base + (extra > 1), base


def mode_name(n: int, sources: int) -> str:
    return f"{n} hook{'s' if n > 1 else ''}, {sources} source{'s' if sources > 1 else ''}"


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
            configs = [(n, (0, 0, n)) for n in ONE_SOURCE]
            configs += [(n, spread(n)) for n in THREE_SOURCES]
            first: Row | None = None
            for n, counts in configs:
                row = _measure_one(report, pooled, scene, n, counts, CAT.command, "",
                                   iterations, runtime)  # fmt: skip
                first = first or row
                _relative(row, first)
            # Hooks that wait rather than compute show what running a tier side by side
            # gains: 16 hooks of 50 ms each, `max_parallel_hooks` (4) at a time.
            first = None
            for n in (1, 16):
                row = _measure_one(report, pooled, scene, n, (0, 0, n), SLEEPER, " sleeping 50 ms",
                                   max(2, iterations // 4), runtime)  # fmt: skip
                first = first or row
                _relative(row, first)
    finally:
        scene.close()


#: a hook that waits 50 ms, then answers like `cat`
SLEEPER = "sleep 0.05; cat"


def _measure_one(
    report: Report,
    pooled: PooledWorker,
    scene: Scene,
    n: int,
    counts: tuple[int, int, int],
    command: str,
    label: str,
    iterations: int,
    runtime: str,
) -> Row:
    ent, team, project = counts

    def cmds(k: int, tag: str) -> list[str]:
        return [f"{command} # {tag} {i}" for i in range(k)]

    scene.set_hooks(enterprise=cmds(ent, "e"), team=cmds(team, "t"), project=cmds(project, "p"))
    sources = sum(1 for k in counts if k)
    payload = event("bench-scaling")

    def once() -> None:
        reply = pooled.worker.handle(payload)
        if reply.gated or reply.records < n + 1:
            raise RuntimeError(f"scaling: {n} hooks gave {reply}")

    name = mode_name(n, sources) + label
    samples = time_calls(f"scaling {name}", iterations, once, warmup=3)
    return report.add(
        Row(SECTION, CAT.name, name, runtime, samples, bare_key(CAT),
            note=f"enterprise {ent} / team {team} / project {project}")
    )  # fmt: skip


def _relative(row: Row, first: Row) -> None:
    ratio = row.summary.p50 / first.summary.p50
    row.extra["ratio_to_one_hook_p50"] = round(ratio, 3)
    row.note += f"; {ratio:.2f}x 1 hook"
