"""The parity table, summary line and JSON from verdicts (no runs)."""

from __future__ import annotations

import json

from bench.parity.compare import ExitComparison, Verdict
from bench.parity.report import render, summarize, verdict_dict


def _ran(
    event_id: str, *, same: bool = True, ratio: float | None = 1.1, node: bool = True
) -> Verdict:
    v = Verdict("owner__repo", event_id, "preToolUse")
    v.answer_same = same
    v.exits = ExitComparison(1 if same else 0, 1, () if same else (0,))
    v.bare_answer_same = True
    v.bare_exits = ExitComparison(1, 1, ())
    v.ratio = ratio
    v.single_node_hook = node
    v.bare_ms = [10.0]
    v.sandbox_hook_ms = [12.0]
    if not same:
        v.causes = ["missing tool in the image: npx"]
    return v


def test_the_summary_counts_events_hook_runs_and_the_node_hook_median() -> None:
    skipped = Verdict("gone__repo", "x", "stop", skipped="not obtained: no commit")
    failed = Verdict("bad__repo", "y", "stop", error="`bash install.sh .` exited 1")
    verdicts = [
        _ran("a", ratio=1.0),
        _ran("b", same=False, ratio=3.0),
        _ran("c", ratio=2.0, node=False),
        _ran("d", ratio=1.4),
        skipped,
        failed,
    ]
    summary = summarize(verdicts)
    assert (summary.events, summary.ran, summary.skipped, summary.errors) == (6, 4, 1, 1)
    assert summary.answers_same == 3
    assert (summary.hook_runs_same, summary.hook_runs) == (3, 4)
    assert summary.node_events == 3 and summary.node_ratio_median == 1.4
    assert summary.node_sandbox_ratio_median == 1.2
    assert summary.causes == {"missing tool in the image: npx": 1}
    line = summary.line()
    assert "3/6 answers same" in line and "3/4 hook runs exit the same" in line
    assert "1.40x over 3 single-node-hook events" in line and "1 skipped, 1 errors" in line
    assert "(the hook alone in the sandbox: 1.20x)" in line


def test_the_table_has_a_row_per_event_with_its_reason() -> None:
    skipped = Verdict("gone__repo", "x", "stop", skipped="not obtained: no commit")
    text = render([_ran("a"), _ran("b", same=False), skipped])
    lines = text.splitlines()
    assert lines[0].split() == ["repo", "event", "answer", "exits", "post", "bare", "ratio", "note"]
    assert len(lines) == 4
    assert "DIFF 0/1" in lines[2] and lines[2].endswith("missing tool in the image: npx")
    assert lines[3].endswith("skipped: not obtained: no commit")


def test_the_json_of_a_verdict_is_plain_json() -> None:
    doc = verdict_dict(_ran("b", same=False))
    assert doc["differing_hooks"] == [0] and doc["exits_same"] is False
    json.dumps(doc, allow_nan=False)
