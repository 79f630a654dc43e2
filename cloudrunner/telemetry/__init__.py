"""The daemon's traces (OpenTelemetry over OTLP/HTTP), off unless an endpoint is set.

- `endpoint`: `[telemetry]` and where spans go once the OTEL_* variables are read;
- `traceparent`: the W3C header a client passes, read and checked;
- `spans`: the small calls the event path makes (no-ops while tracing is off);
- `provider`: the SDK's provider, its batching thread and the count of dropped spans.

Nothing here imports OpenTelemetry until tracing starts.
"""

from cloudrunner.telemetry.endpoint import TelemetryError, TelemetrySettings
from cloudrunner.telemetry.provider import Tracing, start
from cloudrunner.telemetry.spans import (
    OFF,
    carry,
    event_ids,
    front,
    hook,
    hook_ran,
    span,
    waited,
)

__all__ = [
    "OFF",
    "TelemetryError",
    "TelemetrySettings",
    "Tracing",
    "carry",
    "event_ids",
    "front",
    "hook",
    "hook_ran",
    "span",
    "start",
    "waited",
]
