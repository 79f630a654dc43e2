"""docs/reference/routes.md and docs/reference/metrics.md: the daemon's routes (from the
OpenAPI document it serves) and its metrics (from its own Prometheus registry)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from cloudrunner.daemon.openapi import document
from docsgen.markdown import GENERATED_NOTE, code, table


def routes() -> str:
    doc: dict[str, Any] = document()
    rows = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            answers = []
            for status, reply in sorted(op["responses"].items()):
                codes = reply.get("x-error-codes") or []
                answers.append(f"{status}" + (f" ({', '.join(codes)})" if codes else ""))
            rows.append(
                (code(f"{method.upper()} {path}"), op.get("summary", ""), "; ".join(answers))
            )
    out = [
        "# HTTP routes",
        "",
        GENERATED_NOTE,
        f"Every route of `cloudrunner serve`'s API ({doc['info']['title']} "
        f"{doc['info']['version']}), its statuses and the stable error codes of each, from the",
        "OpenAPI document the daemon serves at `GET /openapi.json`. How to use them: [HTTP",
        "API](api.md).",
        "",
        table(("route", "does", "statuses (error codes)"), rows),
    ]
    return "\n".join(out).rstrip() + "\n"


def metrics() -> str:
    from cloudrunner.daemon.core import Daemon
    from cloudrunner.settings import Settings

    with tempfile.TemporaryDirectory(prefix="docsgen-") as state:
        daemon = Daemon(Settings(state_dir=Path(state)))
        try:
            registry = daemon.metrics.registry
            rows = []
            # prometheus_client has no public list of a registry's collectors
            for collector in list(registry._collector_to_names):
                name = getattr(collector, "_name", None)
                if not name or not str(name).startswith("cloudrunner"):
                    continue
                kind = str(getattr(collector, "_type", ""))
                shown = f"{name}_total" if kind == "counter" else str(name)
                labels = ", ".join(code(x) for x in getattr(collector, "_labelnames", ()))
                rows.append((code(shown), kind, labels, getattr(collector, "_documentation", "")))
        finally:
            daemon.close()
    out = [
        "# Metrics",
        "",
        GENERATED_NOTE,
        "`GET /metrics` of `cloudrunner serve`, in Prometheus' text format, from a registry of",
        "the daemon's own; the standard `process_*`, `python_info` and `python_gc_*` metrics of",
        "`prometheus_client` come with them.",
        "",
        table(("metric", "type", "labels", "meaning"), sorted(rows)),
    ]
    return "\n".join(out).rstrip() + "\n"
