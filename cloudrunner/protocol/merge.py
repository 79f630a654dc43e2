"""Running a plan's tiers and merging the answers of several hooks (spec sections 5 and 6).

`run_tiers` drives the tiers for the runner (highest priority first; a block on a blocking
event skips the lower tiers, each skipped hook recorded). `merge` turns all results into the
one answer printed to the agent, and records for every hook what became of each field it
answered: used, overridden (a higher-priority or more restrictive answer won) or dropped
(not applicable: over its loop budget, a deny discarding `updated_input`, ...), and why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cloudrunner.protocol.claude_io import classify_claude
from cloudrunner.protocol.event_names import SUBAGENT_STOP
from cloudrunner.protocol.events import Decision, EventSpec
from cloudrunner.protocol.loops import LoopCounterStore
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.plan import Plan, Tier
from cloudrunner.protocol.planned_hook import PlannedHook
from cloudrunner.protocol.results import Execution, HookResult, classify, skipped

_RESTRICTIVENESS = {"allow": 0, "ask": 1, "deny": 2}


class Fate(StrEnum):
    USED = "used"
    OVERRIDDEN = "overridden"
    DROPPED = "dropped"


@dataclass(frozen=True)
class FieldDecision:
    field: str
    fate: Fate
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "fate": str(self.fate), "reason": self.reason}


@dataclass(frozen=True)
class HookDecision:
    result: HookResult
    #: what became of each field of the hook's answer
    fields: tuple[FieldDecision, ...]
    #: one line: what the hook's result did to the event
    summary: str

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "hook": r.hook.to_dict(),
            "outcome": str(r.outcome),
            "reason": r.reason,
            "exit_code": r.exit_code,
            "fail_closed_block": r.fail_closed_block,
            "summary": self.summary,
            "fields": [f.to_dict() for f in self.fields],
        }


@dataclass(frozen=True)
class MergedAnswer:
    #: the JSON object printed to the agent
    answer: dict[str, Any]
    #: one per result, in priority and file order
    decisions: tuple[HookDecision, ...]
    #: the result whose block decided the event (None when nothing blocked)
    blocked_by: HookResult | None

    @property
    def env(self) -> dict[str, str]:
        env = self.answer.get("env")
        return dict(env) if isinstance(env, dict) else {}


def tier_block(spec: EventSpec, results: Iterable[HookResult]) -> HookResult | None:
    """The first result of a tier that blocks, on an event that can block."""
    if not spec.can_block:
        return None
    blocking = [r for r in results if r.blocks]
    return min(blocking, key=lambda r: r.hook.order) if blocking else None


def skip_tier(tier: Tier, blocker: HookResult) -> tuple[HookResult, ...]:
    """Results for a tier that does not run because a higher-priority source blocked."""
    reason = f"not run: {blocker.hook.describe()} blocked the action in a higher-priority source"
    return tuple(skipped(h, reason) for h in tier.hooks) + tier.resolved


def run_tiers(
    plan: Plan, run_tier: Callable[[Sequence[PlannedHook]], Sequence[Execution]]
) -> tuple[HookResult, ...]:
    """Run each tier (`run_tier` returns one `Execution` per hook, in order) and classify.

    A block in one tier skips every lower tier; `merge` then makes the answer.
    """
    results: list[HookResult] = []
    blocker: HookResult | None = None
    for tier in plan.tiers:
        if blocker is not None:
            results.extend(skip_tier(tier, blocker))
            continue
        executions = run_tier(tier.hooks) if tier.hooks else ()
        if len(executions) != len(tier.hooks):
            raise ValueError(
                f"run_tier returned {len(executions)} executions for {len(tier.hooks)} hooks"
            )
        ran = [
            (classify if h.entry.claude is None else classify_claude)(h, plan.event, e)
            for h, e in zip(tier.hooks, executions, strict=True)
        ]
        tier_results = [*tier.resolved, *ran]
        results.extend(tier_results)
        blocker = tier_block(plan.event, tier_results)
    return tuple(results)


class _Record:
    """Collects field decisions per hook while the merge walks the results."""

    def __init__(self, results: Sequence[HookResult]) -> None:
        self.fields: dict[str, list[FieldDecision]] = {r.hook.hook_id: [] for r in results}

    def add(self, result: HookResult, field: str, fate: Fate, reason: str) -> None:
        self.fields[result.hook.hook_id].append(FieldDecision(field, fate, reason))


def merge(plan: Plan, results: Iterable[HookResult], loops: LoopCounterStore) -> MergedAnswer:
    """The answer to the agent from all results of a plan, and a decision record per hook.

    `loops` counts follow-ups per conversation and script (used on stop and subagentStop).
    """
    spec = plan.event
    ordered = sorted(results, key=lambda r: r.hook.order)
    record = _Record(ordered)
    answer: dict[str, Any] = {}
    for r in ordered:
        for name in r.ignored_fields:
            record.add(r, name, Fate.DROPPED, f"{spec.name} has no output field {name!r}")
    if spec.decision is Decision.PERMISSION:
        _merge_permission(spec, ordered, answer, record)
    elif spec.decision is Decision.CONTINUE:
        _merge_continue(ordered, answer, record)
    fields = spec.output_fields
    if "updated_input" in fields:
        _merge_updated_input(ordered, answer, record)
    if "followup_message" in fields:
        _merge_followup(plan, ordered, answer, record, loops)
    if "additional_context" in fields:
        _merge_context(ordered, answer, record)
    if "updated_mcp_tool_output" in fields:
        _first_wins("updated_mcp_tool_output", ordered, answer, record)
    if spec.decision is Decision.NONE and "user_message" in fields:  # preCompact
        _first_wins("user_message", ordered, answer, record)
    if "env" in fields:
        _merge_env(ordered, answer, record)
    if "pluginPaths" in fields:
        _merge_plugin_paths(ordered, answer, record)
    blocker = tier_block(spec, ordered)
    decisions = tuple(
        HookDecision(r, tuple(record.fields[r.hook.hook_id]), _summary(spec, r, blocker))
        for r in ordered
    )
    return MergedAnswer(answer, decisions, blocker)


def _messages(
    winner: HookResult | None,
    ordered: Sequence[HookResult],
    answer: dict[str, Any],
    record: _Record,
    names: Sequence[str],
) -> None:
    for r in ordered:
        for name in names:
            if name not in r.output:
                continue
            if r is winner:
                answer[name] = r.output[name]
                record.add(r, name, Fate.USED, "from the hook whose decision won")
            elif winner is None:
                record.add(r, name, Fate.DROPPED, "no hook took a decision to carry it")
            else:
                record.add(r, name, Fate.OVERRIDDEN, f"the decision of {winner.hook.hook_id} won")


def _merge_permission(
    spec: EventSpec, ordered: Sequence[HookResult], answer: dict[str, Any], record: _Record
) -> None:
    deciding = [r for r in ordered if "permission" in r.output]
    final = max(
        (r.output["permission"] for r in deciding), key=_RESTRICTIVENESS.__getitem__,
        default="allow",
    )  # fmt: skip
    winner = next((r for r in deciding if r.output["permission"] == final), None)
    answer["permission"] = final
    for r in deciding:
        if r is winner:
            record.add(r, "permission", Fate.USED, f"{final} is the most restrictive answer")
        elif r.output["permission"] == final:
            record.add(
                r, "permission", Fate.OVERRIDDEN,
                f"the same answer came first from {winner.hook.hook_id if winner else '?'}",
            )  # fmt: skip
        else:
            record.add(
                r, "permission", Fate.OVERRIDDEN,
                f"{r.output['permission']} is less restrictive than {final}",
            )  # fmt: skip
    names = [n for n in ("user_message", "agent_message") if n in spec.output_fields]
    _messages(winner, ordered, answer, record, names)


def _merge_continue(ordered: Sequence[HookResult], answer: dict[str, Any], record: _Record) -> None:
    deciding = [r for r in ordered if "continue" in r.output]
    final = all(r.output["continue"] for r in deciding)
    winner = next((r for r in deciding if r.output["continue"] is final), None)
    answer["continue"] = final
    for r in deciding:
        if r is winner:
            record.add(r, "continue", Fate.USED, "false if any hook says false")
        else:
            record.add(r, "continue", Fate.OVERRIDDEN, f"continue is {str(final).lower()}")
    _messages(winner, ordered, answer, record, ["user_message"])


def _merge_updated_input(
    ordered: Sequence[HookResult], answer: dict[str, Any], record: _Record
) -> None:
    first: HookResult | None = None
    for r in ordered:
        if "updated_input" not in r.output:
            continue
        if answer.get("permission") == "deny":
            record.add(r, "updated_input", Fate.DROPPED, "the final permission is deny")
        elif first is None:
            first = r
            answer["updated_input"] = r.output["updated_input"]
            record.add(r, "updated_input", Fate.USED, "the highest-priority updated_input")
        else:
            record.add(
                r, "updated_input", Fate.OVERRIDDEN, f"{first.hook.hook_id} has higher priority"
            )


def _merge_followup(
    plan: Plan,
    ordered: Sequence[HookResult],
    answer: dict[str, Any],
    record: _Record,
    loops: LoopCounterStore,
) -> None:
    status = getattr(plan.payload, "status", None)
    only_when_completed = plan.event.name == SUBAGENT_STOP and status != "completed"
    used: HookResult | None = None
    for r in ordered:
        message = r.output.get("followup_message")
        if not isinstance(message, str):
            continue
        if not message.strip():
            record.add(r, "followup_message", Fate.DROPPED, "empty")
        elif only_when_completed:
            record.add(
                r, "followup_message", Fate.DROPPED,
                f"{SUBAGENT_STOP} status is {status!r}: follow-ups are used only when completed",
            )  # fmt: skip
        elif used is not None:
            record.add(r, "followup_message", Fate.OVERRIDDEN, f"{used.hook.hook_id} comes first")
        else:
            budget = loops.try_consume(plan.conversation_id, r.hook.script_key, r.hook.loop_limit)
            if budget.allowed:
                used = r
                answer["followup_message"] = message
                limit = "unlimited" if budget.limit is None else str(budget.limit)
                record.add(
                    r, "followup_message", Fate.USED,
                    f"follow-up {budget.used} of {limit} for this script in this conversation",
                )  # fmt: skip
            else:
                record.add(
                    r, "followup_message", Fate.DROPPED,
                    f"over loop_limit: {budget.used} of {budget.limit} follow-ups already sent",
                )  # fmt: skip


def _merge_context(ordered: Sequence[HookResult], answer: dict[str, Any], record: _Record) -> None:
    parts = []
    for r in ordered:
        text = r.output.get("additional_context")
        if not isinstance(text, str):
            continue
        if text.strip():
            parts.append(text)
            record.add(r, "additional_context", Fate.USED, "all non-empty contexts are joined")
        else:
            record.add(r, "additional_context", Fate.DROPPED, "empty")
    if parts:
        answer["additional_context"] = "\n\n".join(parts)


def _first_wins(
    name: str, ordered: Sequence[HookResult], answer: dict[str, Any], record: _Record
) -> None:
    first: HookResult | None = None
    for r in ordered:
        if name not in r.output:
            continue
        if first is None:
            first = r
            answer[name] = r.output[name]
            record.add(r, name, Fate.USED, "the highest-priority answer wins")
        else:
            record.add(r, name, Fate.OVERRIDDEN, f"{first.hook.hook_id} has higher priority")


def _merge_env(ordered: Sequence[HookResult], answer: dict[str, Any], record: _Record) -> None:
    env: dict[str, str] = {}
    owner: dict[str, str] = {}
    for r in ordered:
        given = r.output.get("env")
        if not isinstance(given, Mapping):
            continue
        kept = [k for k in given if k not in env]
        lost = [k for k in given if k in env]
        for k in kept:
            env[k] = given[k]
            owner[k] = r.hook.hook_id
        if not lost:
            record.add(r, "env", Fate.USED, f"sets {', '.join(kept) or 'nothing'}")
        else:
            by = ", ".join(f"{k} (by {owner[k]})" for k in lost)
            fate = Fate.USED if kept else Fate.OVERRIDDEN
            note = f"sets {', '.join(kept)}; " if kept else ""
            record.add(r, "env", fate, f"{note}overridden by higher priority: {by}")
    if env:
        answer["env"] = env


def _merge_plugin_paths(
    ordered: Sequence[HookResult], answer: dict[str, Any], record: _Record
) -> None:
    paths: list[str] = []
    for r in ordered:
        given = r.output.get("pluginPaths")
        if not isinstance(given, list):
            continue
        new = [p for p in given if p not in paths]
        paths.extend(dict.fromkeys(new))
        record.add(r, "pluginPaths", Fate.USED, f"adds {len(set(new))} path(s) to the union")
    if paths:
        answer["pluginPaths"] = paths


def _summary(spec: EventSpec, r: HookResult, blocker: HookResult | None) -> str:
    if r.outcome is Outcome.SKIPPED and not r.fail_closed_block:
        return f"skipped: {r.reason}"
    if r.fail_closed_block:
        decided = " and decided the event" if r is blocker else ""
        if r.outcome is Outcome.SKIPPED:
            return f"skipped: {r.reason}{decided}"
        return f"{r.outcome}: {r.reason}; failClosed, so it blocks{decided}"
    if r.outcome.is_failure:
        return f"{r.outcome}: {r.reason}; ignored (fail-open)"
    if r.outcome is Outcome.BLOCKED:
        if not spec.can_block:
            return r.reason
        return "blocked (exit 2)" + (" and decided the event" if r is blocker else "")
    return "ok" + (" and its deny decided the event" if r is blocker else "")
