"""Waiting for a condition in tests: polled with a deadline, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def sample_until(
    sample: Callable[[], T], done: Callable[[T], object], timeout_s: float = 120.0,
    interval_s: float = 0.1,
) -> T:  # fmt: skip
    """Call `sample()` until `done` holds for its value or `timeout_s` has passed; the last
    value either way, for the caller's assertions to judge."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = sample()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(interval_s)


def came_true(
    condition: Callable[[], object], timeout_s: float = 120.0, interval_s: float = 0.1
) -> bool:
    """Whether `condition()` came true within `timeout_s` (polled; False once it passed)."""
    return bool(sample_until(condition, bool, timeout_s, interval_s))


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
