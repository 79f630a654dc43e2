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
            payload = event("bench-scaling")
            configs = [(n, (0, 0, n)) for n in ONE_SOURCE]
            configs += [(n, spread(n)) for n in THREE_SOURCES]
            one = None
            for n, (ent, team, project) in configs:

                def cmds(k: int, tag: str) -> list[str]:
                    return [f"{CAT.command} # {tag} {i}" for i in range(k)]

                scene.set_hooks(
                    enterprise=cmds(ent, "e"), team=cmds(team, "t"), project=cmds(project, "p")
                )
                sources = sum(1 for k in (ent, team, project) if k)

                def once(expected: int = n) -> None:
                    reply = pooled.worker.handle(payload)
                    if reply.gated or reply.records < expected + 1:
                        raise RuntimeError(f"scaling: {expected} hooks gave {reply}")

                samples = time_calls(f"scaling {n}x{sources}", iterations, once, warmup=3)
                row = report.add(
                    Row(
                        SECTION,
                        CAT.name,
                        mode_name(n, sources),
                        runtime,
                        samples,
                        bare_key(CAT),
                        note=f"enterprise {ent} / team {team} / project {project}",
                    )
                )
                if one is None:
                    one = row
                ratio = row.summary.p50 / one.summary.p50
                row.extra["ratio_to_one_hook_p50"] = round(ratio, 3)
                row.note += f"; {ratio:.2f}x 1 hook"
    finally:
        scene.close()
