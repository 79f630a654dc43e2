"""The parity table, its summary and the JSON document."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.parity.compare import Verdict, ratio


def _mark(value: bool | None) -> str:
    return "-" if value is None else ("same" if value else "DIFF")


def _exits(verdict: Verdict) -> str:
    if verdict.exits is None:
        return "-"
    if verdict.exits.total == 0 and not verdict.exits.differing:
        return "none ran"
    return "same" if verdict.exits.all_same else f"DIFF {verdict.exits.same}/{verdict.exits.total}"


def _note(verdict: Verdict) -> str:
    if verdict.skipped:
        return f"skipped: {verdict.skipped}"
    if verdict.error:
        return f"error: {verdict.error}"
    return "; ".join(verdict.causes)


HEADER = ("repo", "event", "answer", "exits", "post", "bare", "ratio", "note")


def rows(verdicts: Sequence[Verdict]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for v in verdicts:
        out.append(
            (
                v.repo.split("__", 1)[0][:22],
                v.event_id[:34],
                _mark(v.answer_same),
                _exits(v),
                _mark(v.post_same),
                "-" if v.bare_exits is None else ("ok" if v.bare_confirms else "DIFF"),
                "-" if v.ratio is None else f"{v.ratio:.2f}x",
                _note(v),
            )
        )
    return out


def render(verdicts: Sequence[Verdict]) -> str:
    table = [HEADER, *rows(verdicts)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER) - 1)]
    lines = []
    for r in table:
        cells = [c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, r[-1]]).rstrip())
    return "\n".join(lines)


@dataclass(frozen=True)
class Summary:
    events: int
    ran: int
    skipped: int
    errors: int
    answers_same: int
    events_all_same: int
    hook_runs_same: int
    hook_runs: int
    posts_same: int
    posts: int
    bare_confirms: int
    node_ratio_median: float | None
    node_events: int
    #: the same events: median of (the hooks' own time in the sandbox / bare)
    node_sandbox_ratio_median: float | None
    ratio_median_all: float | None
    causes: dict[str, int]

    def line(self) -> str:
        node = (
            f"{self.node_ratio_median:.2f}x over {self.node_events} single-node-hook events"
            if self.node_ratio_median is not None
            else "n/a (no single-node-hook event ran)"
        )
        return (
            f"parity: {self.answers_same}/{self.events} answers same, "
            f"{self.hook_runs_same}/{self.hook_runs} hook runs exit the same, "
            f"{self.posts_same}/{self.posts} post checks same, "
            f"{self.events_all_same}/{self.events} events same in all three; "
            f"bare confirms the recording for {self.bare_confirms}/{self.ran}; "
            f"client/bare time ratio median {node}"
            + (
                f" (the hook alone in the sandbox: {self.node_sandbox_ratio_median:.2f}x)"
                if self.node_sandbox_ratio_median is not None
                else ""
            )
            + "; "
            f"{self.skipped} skipped, {self.errors} errors"
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def summarize(verdicts: Sequence[Verdict]) -> Summary:
    ran = [v for v in verdicts if not v.skipped and not v.error]
    node = [v.ratio for v in ran if v.single_node_hook and v.ratio is not None]
    every = [v.ratio for v in ran if v.ratio is not None]
    causes: Counter[str] = Counter()
    for v in ran:
        for cause in v.causes:
            causes[_family(cause)] += 1
    return Summary(
        events=len(verdicts),
        ran=len(ran),
        skipped=sum(1 for v in verdicts if v.skipped),
        errors=sum(1 for v in verdicts if v.error),
        answers_same=sum(1 for v in ran if v.answer_same),
        events_all_same=sum(1 for v in ran if v.all_same),
        hook_runs_same=sum(v.exits.same for v in ran if v.exits),
        hook_runs=sum(v.exits.total for v in ran if v.exits),
        posts_same=sum(1 for v in ran if v.post_same),
        posts=sum(1 for v in ran if v.post_same is not None),
        bare_confirms=sum(1 for v in ran if v.bare_confirms),
        node_ratio_median=statistics.median(node) if node else None,
        node_events=len(node),
        node_sandbox_ratio_median=_median_or_none(
            [
                r
                for v in ran
                if v.single_node_hook
                for r in [ratio(v.sandbox_hook_ms, v.bare_ms)]
                if r is not None
            ]
        ),
        ratio_median_all=statistics.median(every) if every else None,
        causes=dict(causes.most_common()),
    )


def _median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _family(cause: str) -> str:
    """A cause without its per-event detail, for the tally (`client exit 1: ...` -> ...)."""
    return cause.split(": ", 1)[0] if cause.startswith(("client exit", "sandbox error")) else cause


def verdict_dict(v: Verdict) -> dict[str, Any]:
    return {
        "repo": v.repo,
        "event_id": v.event_id,
        "event": v.event,
        "answer_same": v.answer_same,
        "exits_same": None if v.exits is None else v.exits.all_same,
        "hook_runs_same": None if v.exits is None else v.exits.same,
        "hook_runs": None if v.exits is None else v.exits.total,
        "differing_hooks": None if v.exits is None else list(v.exits.differing),
        "post_same": v.post_same,
        "bare_confirms_recording": v.bare_confirms if v.bare_exits else None,
        "single_node_hook": v.single_node_hook,
        "ratio": v.ratio,
        "first_client_ms": v.first_client_ms,
        "client_ms": v.client_ms,
        "bare_ms": v.bare_ms,
        "sandbox_hook_ms": v.sandbox_hook_ms,
        "causes": v.causes,
        "skipped": v.skipped,
        "error": v.error,
        "details": v.details,
    }
