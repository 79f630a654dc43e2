"""One event run bare, as the parity data set's answers were made: no cloudrunner, no
container; every matching project hook of the event, one after another in file order, as
`/bin/sh -c COMMAND` in the repository root with the payload on stdin and only the data set's
environment. Planning (matchers), classifying and merging use cloudrunner's protocol core,
which the recorded answers (made by an independent script) check.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.parity.layout import HOST_PATH
from cloudrunner.protocol.loops import InMemoryLoopCounterStore
from cloudrunner.protocol.merge import merge, run_tiers
from cloudrunner.protocol.plan import Plan, build_plan
from cloudrunner.protocol.planned_hook import PlannedHook
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.protocol.results import Execution, ExecutionStatus
from cloudrunner.sources import SourceSettings, load_sources

#: the bare run's cap on a hook's own timeout (data set README)
MAX_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class HookRun:
    index: int
    command: str
    matched: bool
    exit_code: int | None = None
    outcome: str | None = None
    stdout: str = ""
    stderr: str = ""


@dataclass
class BareResult:
    answer: dict[str, Any]
    hooks: list[HookRun]
    #: wall time of running the matching hooks, one after another
    wall_ms: float


def environment(root: Path, home: Path, version: str) -> dict[str, str]:
    return {
        "PATH": HOST_PATH,
        "HOME": str(home),
        "CURSOR_PROJECT_DIR": str(root),
        "CLAUDE_PROJECT_DIR": str(root),
        "CURSOR_VERSION": version,
        "CURSOR_CODE_REMOTE": "true",
    }


def execute(
    command: str, cwd: Path, env: dict[str, str], stdin: bytes, timeout_s: float
) -> Execution:
    """`/bin/sh -c command`; on timeout the whole process group is killed."""
    proc = subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return Execution(ExecutionStatus.TIMEOUT, None, out, err, f"killed after {timeout_s:g} s")
    return Execution(ExecutionStatus.OK, proc.returncode, out, err)


def project_plan(root: Path, event: str, payload: bytes) -> Plan:
    """The plan of the project's hooks only (no enterprise, team or user source)."""
    sources = load_sources(
        SourceSettings(workspace=root, profile=Profile.CLOUD, trust_workspace=True)
    )
    project = [s for s in sources.loaded if s.kind is SourceKind.PROJECT]
    return build_plan(project, event, payload, profile=Profile.CLOUD)


def run(root: Path, home: Path, event: str, payload: bytes, version: str) -> BareResult:
    plan = project_plan(root, event, payload)
    env = environment(root, home, version)
    runs: dict[str, tuple[PlannedHook, Execution]] = {}
    elapsed = 0.0

    def run_tier(hooks: Any) -> list[Execution]:
        nonlocal elapsed
        out = []
        for hook in hooks:
            start = time.perf_counter()
            done = execute(
                hook.command,
                hook.working_dir,
                env,
                plan.payload_bytes,
                min(hook.timeout, MAX_TIMEOUT_S),
            )
            elapsed += time.perf_counter() - start
            runs[hook.hook_id] = (hook, done)
            out.append(done)
        return out

    results = run_tiers(plan, run_tier)
    merged = merge(plan, results, InMemoryLoopCounterStore())
    hooks: list[HookRun] = []
    by_id = {r.hook.hook_id: r for r in results}
    for tier in plan.tiers:
        every = [*tier.hooks, *(r.hook for r in tier.resolved), *tier.not_matched]
        for hook in sorted(every, key=lambda h: h.index):
            ran = runs.get(hook.hook_id)
            result = by_id.get(hook.hook_id)
            if ran is None:
                hooks.append(
                    HookRun(
                        hook.index,
                        hook.command,
                        hook.match.matched and result is not None,
                        outcome=str(result.outcome) if result else None,
                    )
                )
                continue
            execution = ran[1]
            hooks.append(
                HookRun(
                    hook.index,
                    hook.command,
                    True,
                    execution.exit_code,
                    str(result.outcome) if result else None,
                    execution.stdout.decode("utf-8", "replace"),
                    execution.stderr.decode("utf-8", "replace")[:2000],
                )
            )
    return BareResult(dict(merged.answer), hooks, elapsed * 1000)
