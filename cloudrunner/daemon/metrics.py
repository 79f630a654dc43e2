"""The daemon's metrics, through `prometheus_client` on a registry of the daemon's own.

Counters and the duration histogram are updated per event; gauges are read from their
owners (the pool, the queue) when `/metrics` is scraped, so they are never stale. The
standard process, platform and garbage-collector metrics come with them. What the alerting
rules (deploy/prometheus/) read besides: the events clients answered by the fail policy
(counted when the daemon takes the fallback spool), the audit log's failed operations,
readiness and the engine's reachability (probed at scrape time, at most once a second), and
the cap on daemon sessions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

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
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from cloudrunner.protocol.profiles import SOURCE_NAMES

#: event durations: from 1 ms (a warm session hook) to a minute (a slow hook's timeout)
DURATION_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

#: the text exposition format `render` writes
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: what a `fallback` record says the client answered (`invalid`: a spool line that was not one)
FALLBACK_OUTCOMES: tuple[str, ...] = ("blocked", "allowed", "invalid")

#: how long one readiness probe answers the scrapes that follow it
READINESS_CACHE_S = 1.0

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
        self.fallbacks = Counter(
            "cloudrunner_fallback_events",
            "events clients answered by the fail policy while no daemon answered, taken from "
            "the fallback spool when the daemon started, by outcome (blocked, allowed, invalid)",
            ("outcome",),
            registry=self.registry,
        )
        # series that alerts watch exist from the start (at 0), so their first rise counts
        for outcome in FALLBACK_OUTCOMES:
            self.fallbacks.labels(outcome=outcome)
        for source in SOURCE_NAMES:
            self.hook_outcomes.labels(source=source, outcome="sandbox_error")
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """A gauge whose value is read from its owner at scrape time."""
        Gauge(name, help_text, registry=self.registry).set_function(read)

    def counter(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """A counter its owner counts, read at scrape time (`name` without `_total`)."""
        self.registry.register(_ReadCounter(name, help_text, read))

    def readiness(self, probe: Callable[[], tuple[bool, Mapping[str, Any]]]) -> None:
        """`cloudrunner_ready` and `cloudrunner_engine_up` from the daemon's readiness probe
        (the one `GET /readyz` answers with), run at scrape time at most once a second."""
        cached = _Cached(probe, READINESS_CACHE_S)
        self.gauge(
            "cloudrunner_ready",
            "1 when events can run now (what GET /readyz says: the engine answers, the images "
            "are there, the egress proxy is up, not draining), else 0",
            lambda: float(cached()[0]),
        )
        self.gauge(
            "cloudrunner_engine_up",
            "0 when the last readiness probe found the Docker engine not answering, else 1",
            lambda: 0.0 if cached()[1].get("engine") is False else 1.0,
        )

    def record_fallbacks(self, outcomes: Mapping[str, int]) -> None:
        """Count the events of a fallback spool just taken into the audit log."""
        for outcome, count in outcomes.items():
            if count:
                self.fallbacks.labels(outcome=outcome).inc(count)

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


class _ReadCounter(Collector):
    """A counter whose owner keeps the count. It carries the attributes docsgen reads from
    prometheus_client's own metrics (`_name`, `_type`, `_documentation`, `_labelnames`)."""

    def __init__(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        self._name, self._type, self._documentation = name, "counter", documentation
        self._labelnames: tuple[str, ...] = ()
        self._read = read

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self._name, self._documentation, value=self._read())

    def describe(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self._name, self._documentation)


class _Cached:
    """`probe()`'s answer, asked again only when it is older than `seconds`."""

    def __init__(self, probe: Callable[[], tuple[bool, Mapping[str, Any]]], seconds: float) -> None:
        self._probe, self._seconds = probe, seconds
        self._lock = threading.Lock()
        self._at = -float("inf")
        self._answer: tuple[bool, Mapping[str, Any]] = (False, {})

    def __call__(self) -> tuple[bool, Mapping[str, Any]]:
        with self._lock:
            now = time.monotonic()
            if now - self._at >= self._seconds:
                try:
                    self._answer = self._probe()
                except Exception as exc:  # a probe that breaks says "not ready", not a 500
                    self._answer = (False, {"reason": f"the readiness probe failed: {exc}"})
                self._at = now
            return self._answer
