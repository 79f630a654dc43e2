"""The Prometheus text the daemon serves."""

from __future__ import annotations

from cloudrunner.metrics import DaemonMetrics


def test_counters_histograms_and_gauges_render_in_the_exposition_format() -> None:
    metrics = DaemonMetrics()
    depth = [3]
    metrics.gauge("cloudrunner_queue_depth", "waiting", lambda: depth[0])
    metrics.record_event("stop", "answered", 0.004, [("project", "ok"), ("team", "timeout")])
    metrics.record_event("stop", "answered", 0.2, [("project", "ok")])
    metrics.record_event("stop", "refused", 0.0)
    text = metrics.render()
    lines = text.splitlines()
    assert 'cloudrunner_events_total{event="stop",result="answered"} 2' in lines
    assert 'cloudrunner_events_total{event="stop",result="refused"} 1' in lines
    assert 'cloudrunner_hook_outcomes_total{source="project",outcome="ok"} 2' in lines
    assert 'cloudrunner_hook_outcomes_total{source="team",outcome="timeout"} 1' in lines
    # cumulative buckets: 0.0 and 0.004 are under 5 ms, 0.2 is not
    assert 'cloudrunner_event_duration_seconds_bucket{event="stop",le="0.005"} 2' in lines
    assert 'cloudrunner_event_duration_seconds_bucket{event="stop",le="0.25"} 3' in lines
    assert 'cloudrunner_event_duration_seconds_bucket{event="stop",le="+Inf"} 3' in lines
    assert 'cloudrunner_event_duration_seconds_count{event="stop"} 3' in lines
    assert "# TYPE cloudrunner_event_duration_seconds histogram" in lines
    assert "cloudrunner_queue_depth 3" in lines
    depth[0] = 0
    assert "cloudrunner_queue_depth 0" in metrics.render().splitlines()
    assert text.endswith("\n")


def test_label_values_are_escaped() -> None:
    metrics = DaemonMetrics()
    metrics.events.inc(event='a"b\\c\nd', result="x")
    assert 'event="a\\"b\\\\c\\nd"' in metrics.render()
