"""Waiting for a condition in tests: polled with a deadline, never a fixed sleep (the polling
itself is bench.waiting's, which the bench uses as well)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from bench.waiting import came_true, sample_until

__all__ = ["came_true", "sample_until", "wait_for"]

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T | None], what: str = "the condition", timeout_s: float = 120.0,
    interval_s: float = 0.1, explain: Callable[[], str] | None = None,
) -> T:  # fmt: skip
    """The first true value of `condition()`; fail naming `what` (and adding `explain()`, such
    as a log, when given) when `timeout_s` passes first. An exception `condition` raises (a
    process it watches has died, say) ends the wait at once."""
    value = sample_until(condition, bool, timeout_s, interval_s)
    if not value:
        detail = f":\n{explain()}" if explain is not None else ""
        raise AssertionError(f"{what} did not come true within {timeout_s:g} s{detail}")
    return value
