"""With tracing off (the default) the event path's span calls cost nothing: each gives the
one shared no-op object, `carry` gives back the very function, no attribute is computed, and
no OpenTelemetry module is even imported by the daemon's code."""

from __future__ import annotations

import subprocess
import sys

from cloudrunner import telemetry
from cloudrunner.telemetry import spans


def test_off_every_helper_is_the_shared_no_op() -> None:
    assert not spans.enabled()
    assert telemetry.front("00-bad", "event") is telemetry.OFF
    assert telemetry.span("merge", {"k": "v"}) is telemetry.OFF
    assert telemetry.hook("team", "team:x#/0", "echo hi") is telemetry.OFF
    with telemetry.front(None, "event") as span:
        assert span is telemetry.OFF
        span.set_attribute("anything", 1)  # taken and dropped
        telemetry.hook_ran(span, "ok", 0, None, {"image": "x"})
        telemetry.event_ids("stop", {"conversation_id": "c"})

    def work() -> int:
        return 7

    assert telemetry.carry(work) is work


def test_off_an_error_goes_through_untouched() -> None:
    class Boom(Exception):
        """An error the span must let through."""

    try:
        with telemetry.span("merge"):
            raise Boom("x")
    except Boom as exc:
        assert str(exc) == "x"
    else:
        raise AssertionError("the error was swallowed")


def test_the_daemon_and_the_event_path_import_no_opentelemetry_while_off() -> None:
    code = (
        "import sys, cloudrunner.daemon.core, cloudrunner.daemon.app, cloudrunner.cli;"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
