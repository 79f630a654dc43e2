"""`[telemetry]`: where the daemon sends its traces, and which URL that is once the
standard `OTEL_*` variables are read. No OpenTelemetry import here: the settings are read by
every command, the SDK only by a daemon that traces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict

from cloudrunner.errors import CloudrunnerError

#: the OTLP/HTTP path of traces under a collector's base URL
TRACES_PATH = "/v1/traces"
EXAMPLE = "http://127.0.0.1:4318"


class TelemetryError(CloudrunnerError):
    """The telemetry settings or variables name no usable OTLP endpoint."""


def endpoint_problem(url: str) -> str | None:
    """Why `url` cannot be an OTLP/HTTP collector's address; None when it can. Never quotes
    a password the URL may hold."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "is not a URL with a valid port"
    if parts.scheme not in ("http", "https"):
        return "must be an http:// or https:// URL"
    if not parts.hostname:
        return "names no host"
    if parts.username is not None or parts.password is not None:
        return (
            "carries a user or password; give credentials to the collector through "
            "OTEL_EXPORTER_OTLP_HEADERS instead"
        )
    if parts.query or parts.fragment:
        return "has a query or fragment; an OTLP/HTTP endpoint has neither"
    if port == 0:
        return "has port 0"
    return None


def _shown(url: str) -> str:
    """The URL as an error line shows it: without anything before an `@` in its authority."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "…@" + authority.rpartition("@")[2]
    return f"{scheme}{sep}{authority}{slash}{path}" if sep else url[:200]


def _checked(url: str) -> str:
    url = url.strip()
    if url:
        problem = endpoint_problem(url)
        if problem is not None:
            raise ValueError(
                f"{_shown(url)!r} {problem} (an OTLP/HTTP collector such as {EXAMPLE}; "
                "empty: no tracing)"
            )
    return url


#: the settings key's type: empty, or a checked collector URL
Endpoint = Annotated[str, AfterValidator(_checked)]


def traces_url(base: str) -> str:
    """A collector's base URL with the traces path appended (as the OTLP exporters do with
    OTEL_EXPORTER_OTLP_ENDPOINT), unless it already ends with it."""
    base = base.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def resolve(setting: str, environ: Mapping[str, str]) -> str | None:
    """Where spans go: `[telemetry] otlp_endpoint` when set, else
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as it is), else OTEL_EXPORTER_OTLP_ENDPOINT (its
    traces path); None (no tracing) when none is set or OTEL_SDK_DISABLED is true.
    TelemetryError names the variable whose URL is unusable."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if setting:
        return traces_url(setting)
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        value = environ.get(name, "").strip()
        if not value:
            continue
        problem = endpoint_problem(value)
        if problem is not None:
            raise TelemetryError(
                f"{name} {_shown(value)!r} {problem}: set it to an OTLP/HTTP collector such "
                f"as {EXAMPLE}, or unset it for no tracing"
            )
        return value if name.endswith("TRACES_ENDPOINT") else traces_url(value)
    return None


class TelemetrySettings(BaseModel):
    """The daemon's traces (OpenTelemetry, over OTLP/HTTP); off unless an endpoint is set."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    otlp_endpoint: Endpoint = ""
    """the OTLP/HTTP collector `cloudrunner serve` sends a trace of each event to (its base
    URL; /v1/traces is appended); empty: the OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
    OTEL_EXPORTER_OTLP_ENDPOINT variable, else no tracing"""
