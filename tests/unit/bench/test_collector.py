"""The tracing rows' collector on loopback: what it counts and how it answers (the tests'
receiver built on it, which decodes the spans, is tested with the SDK in
tests/unit/telemetry/test_provider.py)."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request

import pytest

from bench.collector import Collector


def _post(url: str, body: bytes, **headers: str) -> int:
    sent = urllib.request.Request(f"{url}/v1/traces", body, headers, method="POST")
    try:
        with urllib.request.urlopen(sent, timeout=30) as answer:
            assert answer.read() == b""
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def test_it_counts_requests_and_the_bytes_as_sent() -> None:
    with Collector() as collector:
        assert _post(collector.url, b"\x0a\x00") == 200
        assert (
            _post(collector.url, gzip.compress(b"x" * 1000), **{"Content-Encoding": "gzip"}) == 200
        )
        collector.wait_requests(2)
    assert collector.requests == 2
    assert collector.bytes == 2 + len(gzip.compress(b"x" * 1000))


def test_an_erring_collector_answers_500() -> None:
    with Collector("error") as collector:
        assert _post(collector.url, b"") == 500
    assert collector.requests == 1


def test_a_mode_it_does_not_know_is_refused() -> None:
    with pytest.raises(ValueError, match="not 'slow'"):
        Collector("slow")  # type: ignore[arg-type]
