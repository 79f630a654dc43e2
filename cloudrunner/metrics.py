"""The daemon's metrics, rendered in the Prometheus text exposition format (version 0.0.4).

Counters and histograms are kept here under one lock; gauges are read from their owners
(the pool, the queue) when `/metrics` is scraped, so they are never stale.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

#: event durations: from 1 ms (a warm session hook) to a minute (a slow hook's timeout)
DURATION_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

Labels = tuple[tuple[str, str], ...]


def _labels(pairs: Labels) -> str:
    if not pairs:
        return ""
    inner = ",".join(f'{name}="{_escape(value)}"' for name, value in pairs)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


class Counter:
    def __init__(self, name: str, help_text: str, label_names: Sequence[str]) -> None:
        self.name = name
        self.help = help_text
        self.label_names = tuple(label_names)
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple((name, labels[name]) for name in self.label_names)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        key = tuple((name, labels[name]) for name in self.label_names)
        with self._lock:
            return self._values.get(key, 0.0)

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        lines += [f"{self.name}{_labels(key)} {_number(value)}" for key, value in items]
        return lines


class Histogram:
    def __init__(
        self,
        name: str,
        help_text: str,
        label_names: Sequence[str],
        buckets: Sequence[float] = DURATION_BUCKETS,
    ) -> None:
        self.name = name
        self.help = help_text
        self.label_names = tuple(label_names)
        self.buckets = tuple(sorted(buckets))
        self._series: dict[Labels, tuple[list[int], list[float]]] = {}
        self._lock = threading.Lock()

    def observe(self, value: float, **labels: str) -> None:
        key = tuple((name, labels[name]) for name in self.label_names)
        with self._lock:
            counts, totals = self._series.setdefault(key, ([0] * len(self.buckets), [0.0, 0.0]))
            for index, bound in enumerate(self.buckets):
                if value <= bound:
                    counts[index] += 1
            totals[0] += value
            totals[1] += 1

    def render(self) -> list[str]:
        with self._lock:
            items = sorted((key, (list(c), list(t))) for key, (c, t) in self._series.items())
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for key, (counts, (total, count)) in items:
            for bound, bucket in zip(self.buckets, counts, strict=True):
                le = (*key, ("le", _number(bound)))
                lines.append(f"{self.name}_bucket{_labels(le)} {bucket}")
            lines.append(f"{self.name}_bucket{_labels((*key, ('le', '+Inf')))} {int(count)}")
            lines.append(f"{self.name}_sum{_labels(key)} {_number(total)}")
            lines.append(f"{self.name}_count{_labels(key)} {int(count)}")
        return lines


class Gauge:
    """A value read from its owner at scrape time."""

    def __init__(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        self.name = name
        self.help = help_text
        self.read = read

    def render(self) -> list[str]:
        return [
            f"# HELP {self.name} {self.help}",
            f"# TYPE {self.name} gauge",
            f"{self.name} {_number(float(self.read()))}",
        ]


class DaemonMetrics:
    """What `GET /metrics` reports."""

    def __init__(self) -> None:
        self.events = Counter(
            "cloudrunner_events_total",
            "events answered, by event and result (answered, gated, refused, error)",
            ("event", "result"),
        )
        self.hook_outcomes = Counter(
            "cloudrunner_hook_outcomes_total",
            "planned hooks by source and outcome",
            ("source", "outcome"),
        )
        self.durations = Histogram(
            "cloudrunner_event_duration_seconds",
            "time from request to answer, by event",
            ("event",),
        )
        self.gauges: list[Gauge] = []

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        self.gauges.append(Gauge(name, help_text, read))

    def record_event(
        self, event: str, result: str, seconds: float, outcomes: Iterable[tuple[str, str]] = ()
    ) -> None:
        self.events.inc(event=event, result=result)
        self.durations.observe(seconds, event=event)
        for source, outcome in outcomes:
            self.hook_outcomes.inc(source=source, outcome=outcome)

    def render(self) -> str:
        lines = [*self.events.render(), *self.hook_outcomes.render(), *self.durations.render()]
        for gauge in self.gauges:
            lines += gauge.render()
        return "\n".join(lines) + "\n"
