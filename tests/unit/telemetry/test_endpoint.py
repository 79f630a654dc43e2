"""Where spans go: `[telemetry] otlp_endpoint`, else the standard OTEL_EXPORTER_OTLP_*
variables; a URL that cannot be a collector is one line naming the key or the variable
(never a password the URL holds); tracing stays off when nothing is set."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudrunner.settings import SettingsError, load_settings
from cloudrunner.telemetry import TelemetryError, TelemetrySettings, start
from cloudrunner.telemetry.endpoint import endpoint_problem, resolve


def test_tracing_is_off_by_default() -> None:
    settings = load_settings(environ={}, config=None, overrides={"state_dir": "/tmp/x"})
    assert settings.telemetry.otlp_endpoint == ""
    assert resolve("", {}) is None
    assert start(TelemetrySettings(), "w", {}) is None


def test_the_setting_wins_and_gets_the_traces_path() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318"}
    assert resolve("http://collector:4318", env) == "http://collector:4318/v1/traces"
    assert resolve("http://collector:4318/", {}) == "http://collector:4318/v1/traces"
    assert resolve("https://c.example/v1/traces", {}) == "https://c.example/v1/traces"


def test_the_standard_variables_are_honoured() -> None:
    assert (
        resolve("", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == "http://c:4318/v1/traces"
    )
    traces = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:9/custom", **{
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://d:4318"}}  # fmt: skip
    assert resolve("", traces) == "http://c:9/custom"  # used as it is, as the spec says
    assert resolve("http://c:4318", {"OTEL_SDK_DISABLED": "true"}) is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://c:4318", "http:// or https://"),
        ("c:4318", "http:// or https://"),
        ("http://", "names no host"),
        ("http://c:99999", "valid port"),
        ("http://c:port", "valid port"),
        ("http://user:hunter2@c:4318", "OTEL_EXPORTER_OTLP_HEADERS"),
        ("http://c:4318/v1/traces?x=1", "query"),
        ("http://c:0", "port 0"),
    ],
)
def test_a_bad_url_is_named_with_what_to_do(url: str, problem: str) -> None:
    found = endpoint_problem(url)
    assert found is not None and problem in found


def test_a_bad_setting_is_one_line_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[telemetry]\notlp_endpoint = "http://ops:hunter2@collector:4318"\n')
    with pytest.raises(SettingsError) as err:
        load_settings(config, environ={})
    message = err.value.message
    assert "telemetry.otlp_endpoint" in message and "OTEL_EXPORTER_OTLP_HEADERS" in message
    assert "hunter2" not in message and "\n" not in message


def test_an_unknown_key_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[telemetry]\notlp_endpiont = "http://c:4318"\n')
    with pytest.raises(SettingsError, match="otlp_endpiont"):
        load_settings(config, environ={})


def test_a_bad_variable_is_one_line_naming_it() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://a:b@collector:4317"}
    with pytest.raises(TelemetryError) as err:
        start(TelemetrySettings(), "w", env)
    assert err.value.message.startswith("OTEL_EXPORTER_OTLP_ENDPOINT ")
    assert "a:b" not in err.value.message and "\n" not in err.value.message
