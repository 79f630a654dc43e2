"""Reading the daemon's audit records of one event, and the workspace facts for causes."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.parity.through import (
    audited_hooks,
    hook_durations_ms,
    hook_identity,
    other_records,
    workspace_facts,
)
from tests.support.ci import needs_root


def _hook(index: int, exit_code: int | None, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "hook",
        "source": "project",
        "hook_index": index,
        "command": f"hook-{index}",
        "matched": True,
        "exit_code": exit_code,
        "outcome": "ok" if exit_code == 0 else "error",
        "attestation": {"hook_user": "10001:10001"},
        **extra,
    }


def test_the_first_answer_of_an_event_is_read_and_its_repeats_are_not() -> None:
    records = [
        {"kind": "skipped", "source": "user", "reason": "user hooks are not loaded"},
        _hook(1, 0),
        _hook(0, 127, stderr_excerpt="sh: 1: npx: not found"),
        {"kind": "hook", "source": "enterprise", "hook_index": 0, "exit_code": 0},
        {"kind": "decision"},
        _hook(0, 0),  # a timed repeat of the same event
        {"kind": "decision"},
    ]
    hooks = audited_hooks(records)
    assert [(h.index, h.exit_code) for h in hooks] == [(0, 127), (1, 0)]
    assert hooks[0].stderr == "sh: 1: npx: not found"
    assert hook_identity(records) == (10001, 10001)
    assert other_records(records) == []  # the user source is left out by design


def test_refused_and_gated_events_are_reported() -> None:
    records = [
        {"kind": "refused", "reason": "the workspace has no commit"},
        {"kind": "skipped", "source": "project", "reason": "broken hooks file"},
    ]
    assert other_records(records) == [
        "refused: the workspace has no commit",
        "skipped: broken hooks file",
    ]
    assert hook_identity(records) is None


@needs_root("checking as another uid needs root")
def test_writability_is_checked_as_the_hook_uid() -> None:
    # pytest's tmp_path is under a 0700 directory the hook uid cannot enter
    base = Path(tempfile.mkdtemp(prefix="parity-test-"))
    base.chmod(0o755)
    root = base / "ws"
    root.mkdir()
    root.chmod(0o755)
    try:
        _check(root)
    finally:
        shutil.rmtree(base)


def _check(root: Path) -> None:
    facts = workspace_facts(root, (10001, 10001))
    assert (facts.owner_uid, facts.mode, facts.hook_uid, facts.writable) == (0, 0o755, 10001, False)
    root.chmod(0o777)
    assert workspace_facts(root, (10001, 10001)).writable is True
    assert workspace_facts(root, None).writable is None


def test_the_hooks_own_time_is_summed_per_answer() -> None:
    records = [
        _hook(0, 0, duration_ms=30.0),
        _hook(1, 0, duration_ms=12.5),
        {"kind": "decision"},
        _hook(0, 0, duration_ms=20),
        {"kind": "decision"},
        {"kind": "decision"},  # an answer where no hook ran
    ]
    assert hook_durations_ms(records) == [42.5, 20.0, 0.0]
