"""Building real parsed sources and plans for the protocol tests (no file system needed)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudrunner.protocol.config import HookEntry, parse_hooks_file
from cloudrunner.protocol.loops import InMemoryLoopCounterStore
from cloudrunner.protocol.merge import MergedAnswer, merge, run_tiers
from cloudrunner.protocol.plan import Plan, build_plan
from cloudrunner.protocol.planned_hook import PlannedHook
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.protocol.results import Execution, ExecutionStatus


@dataclass(frozen=True)
class ParsedSource:
    kind: SourceKind
    path: Path | None
    working_dir: Path | None
    sha256: str | None
    hooks: Mapping[str, tuple[HookEntry, ...]]


def source(kind: SourceKind, hooks: dict[str, list[dict[str, Any]]]) -> ParsedSource:
    path = Path(f"/{kind}/hooks.json")
    parsed = parse_hooks_file(json.dumps({"version": 1, "hooks": hooks}).encode(), file=str(path))
    assert parsed.config is not None, parsed.diagnostics
    return ParsedSource(kind, path, path.parent, "0" * 64, parsed.config.hooks)


def ok(answer: dict[str, Any] | str = "") -> Execution:
    stdout = answer if isinstance(answer, str) else json.dumps(answer)
    return Execution(ExecutionStatus.OK, 0, stdout.encode())


def exit_code(code: int, stdout: str = "", stderr: str = "") -> Execution:
    return Execution(ExecutionStatus.OK, code, stdout.encode(), stderr.encode())


def run(
    sources: Sequence[ParsedSource],
    event: str,
    payload: dict[str, Any],
    executions: Mapping[str, Execution],
    *,
    loops: InMemoryLoopCounterStore | None = None,
    profile: Profile = Profile.CLOUD,
) -> tuple[Plan, MergedAnswer, list[str]]:
    """Plan, run (each hook gets the execution named by its command) and merge.

    Also returns the commands in the order the tiers asked for them.
    """
    plan = build_plan(sources, event, payload, profile=profile)
    asked: list[str] = []

    def run_tier(hooks: Sequence[PlannedHook]) -> list[Execution]:
        asked.extend(h.command for h in hooks)
        return [executions.get(h.command, ok()) for h in hooks]

    results = run_tiers(plan, run_tier)
    return plan, merge(plan, results, loops or InMemoryLoopCounterStore()), asked


def fates(merged: MergedAnswer, command: str) -> dict[str, str]:
    for d in merged.decisions:
        if d.result.hook.command == command:
            return {f.field: str(f.fate) for f in d.fields}
    raise AssertionError(f"no decision for {command}")
