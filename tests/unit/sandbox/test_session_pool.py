"""The warm pool's bookkeeping: one sandbox per key, LRU eviction of idle ones, the idle
sweep, and lending. Constructing a SessionSandbox starts no container, so no engine here."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cloudrunner.sandbox.base import SandboxLabels, SandboxSpec
from cloudrunner.sandbox.engine import EngineLink
from cloudrunner.sandbox.session_pool import SessionPool


def _spec(workspace: Path, session: str, source: str = "project") -> SandboxSpec:
    return SandboxSpec(workspace=workspace, labels=SandboxLabels("w", session, source))


def _pool(**kwargs: float) -> SessionPool:
    def no_engine() -> object:
        raise AssertionError("the pool's bookkeeping must not reach the engine")

    return SessionPool(EngineLink(no_engine), **kwargs)  # type: ignore[arg-type]


def test_one_sandbox_per_workspace_session_and_source(tmp_path: Path) -> None:
    pool = _pool()
    first = pool.get(_spec(tmp_path, "c1"))
    assert pool.get(_spec(tmp_path, "c1")) is first
    assert pool.get(_spec(tmp_path, "c1", "team")) is not first
    assert pool.get(_spec(tmp_path, "c2")) is not first
    other = tmp_path / "other"
    other.mkdir()
    assert pool.get(_spec(other, "c1")) is not first
    assert len(pool) == 4
    assert pool.close_session("c1") == 3
    assert pool.close_workspace(tmp_path) == 1
    assert len(pool) == 0


def test_the_least_recently_used_idle_sandbox_is_evicted_over_the_cap(tmp_path: Path) -> None:
    pool = _pool(max_warm=2)
    a = pool.get(_spec(tmp_path, "a"))
    pool.get(_spec(tmp_path, "b"))
    assert pool.get(_spec(tmp_path, "a")) is a  # a is now the most recent
    pool.get(_spec(tmp_path, "c"))
    assert len(pool) == 2 and pool.evicted == 1
    assert pool.get(_spec(tmp_path, "a")) is a, "b went, a stayed"


def test_a_borrowed_sandbox_is_never_evicted_under_its_run(tmp_path: Path) -> None:
    pool = _pool(max_warm=1)
    lent = pool.borrow(_spec(tmp_path, "a"))
    pool.get(_spec(tmp_path, "b"))
    assert len(pool) == 2, "over the cap while a is in use"
    lent.close()
    pool.get(_spec(tmp_path, "c"))
    assert len(pool) == 1


def test_the_sweep_closes_only_sandboxes_idle_past_the_timeout(tmp_path: Path) -> None:
    pool = _pool(idle_timeout_s=60)
    pool.get(_spec(tmp_path, "old"))
    lent = pool.borrow(_spec(tmp_path, "busy"))
    assert pool.sweep(now=time.monotonic() + 30) == 0
    assert pool.sweep(now=time.monotonic() + 120) == 1
    assert len(pool) == 1
    lent.close()
    assert pool.sweep(now=time.monotonic() + 120) == 1


def test_a_changed_spec_replaces_the_sandbox(tmp_path: Path) -> None:
    pool = _pool()
    first = pool.get(_spec(tmp_path, "a"))
    changed = SandboxSpec(
        workspace=tmp_path, labels=SandboxLabels("w", "a", "project"), config_dirs=(tmp_path,)
    )
    assert pool.get(changed) is not first
    assert len(pool) == 1


def test_a_closed_pool_lends_nothing(tmp_path: Path) -> None:
    pool = _pool()
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.get(_spec(tmp_path, "a"))
