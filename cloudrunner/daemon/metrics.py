"""The daemon's metrics, through `prometheus_client` on a registry of the daemon's own.

Counters and the duration histogram are updated per event; gauges are read from their
owners (the pool, the queue) when `/metrics` is scraped, so they are never stale. The
standard process, platform and garbage-collector metrics come with them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

#: event durations: from 1 ms (a warm session hook) to a minute (a slow hook's timeout)
DURATION_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

#: the text exposition format `render` writes
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# the *_created series double every counter's lines and nothing here reads them
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


class DaemonMetrics:
    """What `GET /metrics` reports."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.events = Counter(
            "cloudrunner_events",
            "events answered, by event and result (answered, gated, refused, error)",
            ("event", "result"),
            registry=self.registry,
        )
        self.hook_outcomes = Counter(
            "cloudrunner_hook_outcomes",
            "planned hooks by source and outcome",
            ("source", "outcome"),
            registry=self.registry,
        )
        self.egress = Counter(
            "cloudrunner_egress_attempts",
            "connection attempts through the egress proxy, by source and decision "
            "(allowed, refused)",
            ("source", "decision"),
            registry=self.registry,
        )
        self.durations = Histogram(
            "cloudrunner_event_duration_seconds",
            "time from request to answer, by event",
            ("event",),
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """A gauge whose value is read from its owner at scrape time."""
        Gauge(name, help_text, registry=self.registry).set_function(read)

    def record_event(
        self,
        event: str,
        result: str,
        seconds: float,
        outcomes: Iterable[tuple[str, str]] = (),
        egress: Iterable[tuple[str, str]] = (),
    ) -> None:
        self.events.labels(event=event, result=result).inc()
        self.durations.labels(event=event).observe(seconds)
        for source, outcome in outcomes:
            self.hook_outcomes.labels(source=source, outcome=outcome).inc()
        for source, decision in egress:
            self.egress.labels(source=source, decision=decision).inc()

    def render(self) -> str:
        return prometheus_client.generate_latest(self.registry).decode()
