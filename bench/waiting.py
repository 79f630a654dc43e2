"""Waiting for a condition: polled with a deadline, never a fixed sleep. The tests' helper
(tests/support/waiting.py) builds on this one; it lives here, not in tests/, because the
bench is a tool that does not import the tests (they import it)."""

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
    value either way, for the caller to judge. An exception of `sample` ends the wait."""
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
