"""Percentiles and summaries of latency samples (milliseconds)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), interpolated between the closest ranks."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Summary:
    n: int
    p50: float
    p90: float
    p99: float
    mean: float
    min: float
    max: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Summary:
        if not samples:
            nan = math.nan
            return cls(0, nan, nan, nan, nan, nan, nan)
        return cls(
            n=len(samples),
            p50=percentile(samples, 50),
            p90=percentile(samples, 90),
            p99=percentile(samples, 99),
            mean=sum(samples) / len(samples),
            min=min(samples),
            max=max(samples),
        )


def ratio(value: float, baseline: float) -> float:
    if not baseline or math.isnan(baseline) or math.isnan(value):
        return math.nan
    return value / baseline
