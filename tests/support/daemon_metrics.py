"""The metric names a daemon's `GET /metrics` carries and the ones a PromQL expression reads,
for the tests that check the alerting rules and the dashboard against the daemon."""

from __future__ import annotations

import tempfile
from pathlib import Path

import promql_parser

from cloudrunner.daemon.core import Daemon
from cloudrunner.settings import Settings
from tests.support.prometheus import samples


def exported_names() -> frozenset[str]:
    """Every sample name a daemon's exposition carries, read from a real daemon's registry
    (labelled metrics are given one child each, so their names show)."""
    with tempfile.TemporaryDirectory(prefix="metrics-") as state:
        daemon = Daemon(Settings(state_dir=Path(state)))
        try:
            daemon.metrics.record_event("stop", "answered", 0.01, [("project", "ok")],
                                        [("project", "allowed")])  # fmt: skip
            text = daemon.metrics.render()
        finally:
            daemon.close()
    return frozenset(name for name, _ in samples(text))


#: Grafana's variables, as a value PromQL parses
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__range": "1h", "$__interval": "1m"}


def names_in(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (Grafana's variables allowed)."""
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    names: set[str] = set()

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names
