"""The Prometheus text the daemon serves (prometheus_client, on the daemon's own registry)."""

from __future__ import annotations

import prometheus_client
import pytest

from cloudrunner.daemon.metrics import DaemonMetrics, _Cached
from tests.support.prometheus import samples, value


def test_counters_histograms_and_gauges_render_in_the_exposition_format() -> None:
    metrics = DaemonMetrics()
    depth = [3]
    metrics.gauge("cloudrunner_queue_depth", "waiting", lambda: depth[0])
    metrics.record_event("stop", "answered", 0.004, [("project", "ok"), ("team", "timeout")])
    metrics.record_event("stop", "answered", 0.2, [("project", "ok")])
    metrics.record_event("stop", "refused", 0.0)
    text = metrics.render()
    assert value(text, "cloudrunner_events_total", event="stop", result="answered") == 2
    assert value(text, "cloudrunner_events_total", event="stop", result="refused") == 1
    assert value(text, "cloudrunner_hook_outcomes_total", source="project", outcome="ok") == 2
    assert value(text, "cloudrunner_hook_outcomes_total", source="team", outcome="timeout") == 1
    # cumulative buckets: 0.0 and 0.004 are under 5 ms, 0.2 is not
    bucket = "cloudrunner_event_duration_seconds_bucket"
    assert value(text, bucket, event="stop", le="0.005") == 2
    assert value(text, bucket, event="stop", le="0.25") == 3
    assert value(text, bucket, event="stop", le="+Inf") == 3
    assert value(text, "cloudrunner_event_duration_seconds_count", event="stop") == 3
    assert "# TYPE cloudrunner_event_duration_seconds histogram" in text.splitlines()
    assert value(text, "cloudrunner_queue_depth") == 3
    depth[0] = 0
    assert value(metrics.render(), "cloudrunner_queue_depth") == 0
    assert text.endswith("\n")


def test_the_standard_process_metrics_come_along() -> None:
    text = DaemonMetrics().render()
    names = {name for name, _ in samples(text)}
    assert {"process_resident_memory_bytes", "process_open_fds", "python_info"} <= names
    assert not any(name.endswith("_created") for name in names)


def test_each_daemon_has_its_own_registry() -> None:
    first, second = DaemonMetrics(), DaemonMetrics()  # a shared registry would refuse this
    first.record_event("stop", "answered", 0.01)
    seen = value(second.render(), "cloudrunner_events_total", event="stop", result="answered")
    assert seen is None
    assert "cloudrunner_events_total" not in prometheus_client.generate_latest().decode()


def test_label_values_are_escaped() -> None:
    metrics = DaemonMetrics()
    metrics.record_event('a"b\\c\nd', "x", 0.0)
    text = metrics.render()
    assert 'event="a\\"b\\\\c\\nd"' in text
    assert value(text, "cloudrunner_events_total", event='a"b\\c\nd', result="x") == 1


def test_fallbacks_are_counted_by_outcome_and_start_at_zero() -> None:
    metrics = DaemonMetrics()
    text = metrics.render()
    for outcome in ("blocked", "allowed", "invalid"):
        assert value(text, "cloudrunner_fallback_events_total", outcome=outcome) == 0
    metrics.record_fallbacks({"blocked": 2, "invalid": 1, "allowed": 0})
    metrics.record_fallbacks({"blocked": 1})
    text = metrics.render()
    assert value(text, "cloudrunner_fallback_events_total", outcome="blocked") == 3
    assert value(text, "cloudrunner_fallback_events_total", outcome="invalid") == 1
    assert value(text, "cloudrunner_fallback_events_total", outcome="allowed") == 0


def test_sandbox_errors_of_every_source_start_at_zero() -> None:
    # an alert on their increase sees the first one (a series born at 1 has no increase)
    text = DaemonMetrics().render()
    for source in ("enterprise", "team", "project", "user"):
        name = "cloudrunner_hook_outcomes_total"
        assert value(text, name, source=source, outcome="sandbox_error") == 0


def test_a_counter_its_owner_keeps_is_read_at_scrape_time() -> None:
    metrics = DaemonMetrics()
    count = [0]
    metrics.counter("cloudrunner_things", "things that failed", lambda: count[0])
    assert value(metrics.render(), "cloudrunner_things_total") == 0
    count[0] = 4
    text = metrics.render()
    assert value(text, "cloudrunner_things_total") == 4
    assert "# TYPE cloudrunner_things_total counter" in text.splitlines()


@pytest.mark.parametrize(
    ("answer", "ready", "engine"),
    [
        ((True, {"engine": True}), 1, 1),
        ((False, {"reason": "image(s) missing", "engine": True}), 0, 1),
        ((False, {"reason": "the Docker engine does not answer", "engine": False}), 0, 0),
        ((False, {"reason": "the daemon is shutting down"}), 0, 1),
    ],
)
def test_readiness_and_the_engine_are_gauges(
    answer: tuple[bool, dict[str, object]], ready: int, engine: int
) -> None:
    metrics = DaemonMetrics()
    metrics.readiness(lambda: answer)
    text = metrics.render()
    assert value(text, "cloudrunner_ready") == ready
    assert value(text, "cloudrunner_engine_up") == engine


def test_one_probe_answers_both_gauges_and_a_broken_probe_says_not_ready() -> None:
    calls: list[int] = []

    def probe() -> tuple[bool, dict[str, object]]:
        calls.append(1)
        raise RuntimeError("boom")

    metrics = DaemonMetrics()
    metrics.readiness(probe)
    text = metrics.render()  # no exception: the scrape still answers
    assert value(text, "cloudrunner_ready") == 0
    assert len(calls) == 1  # both gauges of one scrape share a probe


def test_the_probe_cache_asks_again_once_its_answer_is_old() -> None:
    answers = iter([(True, {}), (False, {})])
    fresh = _Cached(lambda: next(answers), 0.0)
    assert fresh()[0] is True and fresh()[0] is False
    asked: list[int] = []

    def probe() -> tuple[bool, dict[str, object]]:
        asked.append(1)
        return True, {}

    held = _Cached(probe, 3600.0)
    assert held() is held()
    assert len(asked) == 1
