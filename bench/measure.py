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


class Stopwatch:
    """Elapsed milliseconds since it was made."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    @property
    def ms(self) -> float:
        return (time.perf_counter() - self._start) * 1000.0
