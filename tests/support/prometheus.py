"""Read the daemon's `/metrics` text as samples, whatever the exposition's spelling
(label order, `1` or `1.0`)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(text: str, name: str, **labels: str) -> float | None:
    """The sample `name{labels}` in `text`, None when it is not there."""
    return samples(text).get((name, frozenset(labels.items())))
