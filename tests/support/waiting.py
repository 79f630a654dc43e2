"""Waiting for a condition in tests: polled with a deadline, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    condition: Callable[[], object], what: str = "the condition", timeout_s: float = 120.0,
    interval_s: float = 0.1,
) -> None:  # fmt: skip
    """Return once `condition()` is true; fail naming `what` when `timeout_s` passes first."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not come true within {timeout_s:g} s")
        time.sleep(interval_s)
