"""Timing loops: warm up, then time each call on the monotonic high-resolution clock."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("bench")


def time_calls(label: str, n: int, once: Callable[[], None], warmup: int = 2) -> list[float]:
    """Milliseconds of `n` calls of `once` after `warmup` untimed ones."""
    for _ in range(warmup):
        once()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        once()
        samples.append((time.perf_counter() - start) * 1000.0)
    log.info("%s: %d runs", label, n)
    return samples


def time_interleaved(
    label: str, n: int, calls: dict[str, Callable[[], None]], warmup: int = 2
) -> dict[str, list[float]]:
    """Milliseconds of `n` calls of each function, taken in turn (a, b, c, a, b, c, ...), so
    that whatever else loads the machine meanwhile weighs on all of them alike: their
    ratios are what such a run can tell."""
    for _ in range(warmup):
        for once in calls.values():
            once()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(n):
        for name, once in calls.items():
            start = time.perf_counter()
            once()
            samples[name].append((time.perf_counter() - start) * 1000.0)
    log.info("%s: %d runs of %d, interleaved", label, n, len(calls))
    return samples


class Stopwatch:
    """Elapsed milliseconds since it was made."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    @property
    def ms(self) -> float:
        return (time.perf_counter() - self._start) * 1000.0
