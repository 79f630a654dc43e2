"""The Prometheus text the daemon serves (prometheus_client, on the daemon's own registry)."""

from __future__ import annotations

import prometheus_client

from cloudrunner.daemon.metrics import DaemonMetrics
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
