"""The benchmark's pure parts: percentiles, the JSON document and the table."""

from __future__ import annotations

import json
import math

from bench.results import SECTIONS, Report, Row
from bench.stats import Summary, percentile
from bench.table import render
from bench.targets import evaluate


def test_percentiles_interpolate_between_ranks() -> None:
    samples = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(samples, 50) == 50.5
    assert percentile(samples, 90) == 90.1
    assert math.isclose(percentile(samples, 99), 99.01)
    assert percentile([3.0], 99) == 3.0
    assert math.isnan(percentile([], 50))
    assert Summary.of([2.0, 1.0, 3.0]).p50 == 2.0


def report() -> Report:
    r = Report({"smoke": True})
    r.add(Row("sandbox", "cat", "bare", "host", [1.0, 2.0, 3.0]))
    r.add(Row("sandbox", "cat", "session", "runc", [4.0, 5.0, 6.0], "sandbox/cat/bare/host"))
    r.add(Row("throughput", "cat", "8 sessions", "runc", [], "sandbox/cat/bare/host",
              extra={"events_per_s": 350.0, "peak_rss_mb": 80.0}))  # fmt: skip
    return r


def test_every_section_is_in_the_json_and_ratios_are_to_the_same_runs_bare() -> None:
    r = report()
    doc = r.to_dict()
    assert list(doc["sections"]) == list(SECTIONS)
    session = doc["sections"]["sandbox"][1]
    assert session["ratio_to_bare_p50"] == 2.5
    assert doc["sections"]["throughput"][0]["p50_ms"] is None  # no samples: null, not NaN
    json.dumps(doc, allow_nan=False)


def test_targets_are_reported_met_missed_or_not_measured() -> None:
    r = report()
    verdicts = {t["target"].split(":")[0]: t["met"] for t in evaluate(r)}
    assert verdicts["session mode, trivial hook"] is True  # +3 ms at p50, +3 ms at p99
    assert verdicts[">= 300 trivial events/s over 8 concurrent sessions"] is True
    assert verdicts["worker resident memory under 100 MB with 8 warm sessions"] is True
    assert verdicts["per-event client under 25 ms p50 with the daemon up"] is None
    r.targets = evaluate(r)
    text = render(r)
    assert text.splitlines()[0].split()[:3] == ["section", "case", "mode"]
    assert "[not measured] per-event client" in text
