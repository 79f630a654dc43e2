"""The Grafana dashboard of `cloudrunner serve` (deploy/grafana/cloudrunner.json), built with
the Grafana Foundation SDK.

Every query reads the daemon's own metrics (`GET /metrics`, see docs/reference/metrics.md)
from a Prometheus data source chosen on the dashboard, for the scrape job and instances
chosen there; a test checks that each metric a query names is one the daemon exports.
"""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

UID = "cloudrunner"
TITLE = "cloudrunner"
#: the selector every query starts from: the dashboard's job and instances
SCOPE = 'job=~"$job", instance=~"$instance"'
RATE = "$__rate_interval"

_DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")


def _query(expr: str, legend: str, ref: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref)


def _panel(
    title: str,
    description: str,
    unit: str,
    queries: list[tuple[str, str]],
    *,
    width: int = 12,
) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(_DATASOURCE)
        .span(width)
        .height(8)
        .min(0)
        .fill_opacity(10)
        .legend(
            common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI))
    )
    for index, (expr, legend) in enumerate(queries):
        panel.with_target(_query(expr, legend, chr(ord("A") + index)))
    return panel


def _rate(metric: str, by: str, matchers: str = "") -> str:
    selector = f"{metric}{{{SCOPE}{', ' + matchers if matchers else ''}}}"
    return f"sum by ({by}) (rate({selector}[{RATE}]))"


def _quantile(q: float, by: str = "") -> str:
    labels = f"{by}, le" if by else "le"
    bucket = f"cloudrunner_event_duration_seconds_bucket{{{SCOPE}}}"
    return f"histogram_quantile({q}, sum by ({labels}) (rate({bucket}[{RATE}])))"


def rows() -> list[tuple[str, list[timeseries.Panel]]]:
    """The dashboard's rows and their panels, top to bottom."""
    events = [
        _panel(
            "Events by event and result",
            "Events answered per second, by event and result (answered, gated, refused, error).",
            "reqps",
            [(_rate("cloudrunner_events_total", "event, result"), "{{event}} {{result}}")],
        ),
        _panel(
            "Refusals and errors by event",
            "Events refused (a bad request, over a cap, draining) or failed in the worker.",
            "reqps",
            [
                (
                    _rate("cloudrunner_events_total", "event, result", 'result=~"refused|error"'),
                    "{{event}} {{result}}",
                )
            ],
        ),
        _panel(
            "Events in flight and queued",
            "Events being handled, and those waiting for a slot (server.max_concurrent_events).",
            "short",
            [
                (
                    f"sum by (instance) (cloudrunner_events_in_flight{{{SCOPE}}})",
                    "{{instance}} in flight",
                ),
                (f"sum by (instance) (cloudrunner_queue_depth{{{SCOPE}}})", "{{instance}} queued"),
            ],
        ),
        _panel(
            "Egress attempts by source and decision",
            "Connections hooks tried through the egress proxy, allowed or refused.",
            "reqps",
            [
                (
                    _rate("cloudrunner_egress_attempts_total", "source, decision"),
                    "{{source}} {{decision}}",
                )
            ],
        ),
    ]
    hooks = [
        _panel(
            "Hook outcomes by source",
            "Planned hooks per second, by source and outcome (ok, blocked, error, timeout, ...).",
            "ops",
            [
                (
                    _rate("cloudrunner_hook_outcomes_total", "source, outcome"),
                    "{{source}} {{outcome}}",
                )
            ],
        ),
        _panel(
            "Sandbox errors by source",
            "Hook runs the sandbox failed (alert CloudrunnerHookSandboxErrors).",
            "ops",
            [
                (
                    _rate("cloudrunner_hook_outcomes_total", "source", 'outcome="sandbox_error"'),
                    "{{source}}",
                )
            ],
        ),
    ]
    latency = [
        _panel(
            "Event latency",
            "Time from request to answer, all events: 50th, 90th and 99th percentiles.",
            "s",
            [(_quantile(0.5), "p50"), (_quantile(0.9), "p90"), (_quantile(0.99), "p99")],
        ),
        _panel(
            "Event latency p99 by event",
            "The 99th percentile of each event (alert CloudrunnerSlowEvents over 5 s).",
            "s",
            [(_quantile(0.99, "event"), "{{event}}")],
        ),
    ]
    daemon = [
        _panel(
            "Events answered by the fail policy",
            "Events the clients answered without a daemon, taken from the fallback spool when "
            "the daemon started, by outcome (alert CloudrunnerFallbackAnswers).",
            "short",
            [(f"sum by (outcome) (cloudrunner_fallback_events_total{{{SCOPE}}})", "{{outcome}}")],
            width=8,
        ),
        _panel(
            "Audit log failures",
            "Operations on the audit log that failed (alert CloudrunnerAuditWriteFailures).",
            "short",
            [
                (
                    f"sum by (instance) (increase(cloudrunner_audit_write_failures_total"
                    f"{{{SCOPE}}}[{RATE}]))",
                    "{{instance}}",
                )
            ],
            width=8,
        ),
        _panel(
            "Ready and engine",
            "1 when the daemon is ready (GET /readyz) and when its Docker engine answers.",
            "short",
            [
                (f"min by (instance) (cloudrunner_ready{{{SCOPE}}})", "{{instance}} ready"),
                (f"min by (instance) (cloudrunner_engine_up{{{SCOPE}}})", "{{instance}} engine"),
            ],
            width=8,
        ),
        _panel(
            "Sessions",
            "Daemon sessions open (the default one included) against server.max_sessions, "
            "and warm session sandboxes.",
            "short",
            [
                (f"sum by (instance) (cloudrunner_sessions{{{SCOPE}}})", "{{instance}} sessions"),
                (
                    f"sum by (instance) (cloudrunner_max_sessions{{{SCOPE}}}) + 1",
                    "{{instance}} cap",
                ),
                (
                    f"sum by (instance) (cloudrunner_warm_sandboxes{{{SCOPE}}})",
                    "{{instance}} warm sandboxes",
                ),
            ],
            width=8,
        ),
        _panel(
            "Daemon CPU",
            "CPU seconds per second of the daemon's process (hooks run in their containers).",
            "short",
            [
                (
                    f"sum by (instance) (rate(process_cpu_seconds_total{{{SCOPE}}}[{RATE}]))",
                    "{{instance}}",
                )
            ],
            width=8,
        ),
        _panel(
            "Daemon memory",
            "Resident memory of the daemon's process.",
            "bytes",
            [(f"sum by (instance) (process_resident_memory_bytes{{{SCOPE}}})", "{{instance}}")],
            width=8,
        ),
    ]
    return [
        ("Events", events),
        ("Hooks", hooks),
        ("Latency", latency),
        ("Fail policy, audit and the daemon", daemon),
    ]


def build() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model."""
    board = (
        dash.Dashboard(TITLE)
        .uid(UID)
        .description("cloudrunner serve: events, hooks, latency, fail policy, audit, daemon")
        .tags(["cloudrunner"])
        .refresh("30s")
        .time("now-6h", "now")
        .timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .with_variable(dash.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
        .with_variable(
            dash.QueryVariable("job")
            .label("Job")
            .datasource(_DATASOURCE)
            .query("label_values(cloudrunner_sessions, job)")
            .refresh(model.VariableRefresh.ON_DASHBOARD_LOAD)
            .current(model.VariableOption(text="cloudrunner", value="cloudrunner"))
        )
        .with_variable(
            dash.QueryVariable("instance")
            .label("Instance")
            .datasource(_DATASOURCE)
            .query('label_values(cloudrunner_sessions{job=~"$job"}, instance)')
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .multi(True)
            .include_all(True)
            .all_value(".*")
        )
    )
    ids = iter(range(1, 1000))
    for title, panels in rows():
        board.with_row(dash.Row(title).id(next(ids)))
        for panel in panels:
            board.with_panel(panel.id(next(ids)))
    built: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    return built


def render() -> str:
    """The committed file's text."""
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def queries(board: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard: its panels' targets and its query variables'
    selectors."""
    out = [
        str(target["expr"])
        for panel in board.get("panels", [])
        for target in panel.get("targets", [])
        if "expr" in target
    ]
    for variable in board.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable["query"]
            text = query.get("query", "") if isinstance(query, dict) else str(query)
            if text.startswith("label_values(") and "," in text:
                out.append(text.removeprefix("label_values(").rsplit(",", 1)[0])
    return out
