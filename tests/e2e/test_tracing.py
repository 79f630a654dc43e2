"""Traces of real events: a real daemon (`cloudrunner serve`, `[telemetry] otlp_endpoint`)
runs a real hook in a real container for events sent by both clients with the agent's
TRACEPARENT, and sends its spans over OTLP/HTTP to a real receiver on loopback, which decodes
them with the opentelemetry-proto messages. Each event is one trace under the agent's parent,
with the spans of the front, admission, the audit syncs, the hook and the merge, the ids as
attributes, and not a byte of the payload, the hook's command or its output. A collector that
hangs loses spans (counted), never an event; an unusable endpoint stops the start with one
line."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Deployment, make_deployment
from tests.support.daemon_process import DaemonProcess, daemon_process
from tests.support.docker_tracking import DockerTracker
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver
from tests.support.prometheus import value
from tests.support.two_clients import missing_client, run_one
from tests.support.waiting import sample_until

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
#: text that may be in a payload, a command or an output, and must never be exported
PROMPT = "PROMPT-MARKER-4c1e the password is hunter2"
COMMAND_MARKER = "CMD-MARKER-9d27"
OUTPUT_MARKER = "OUT-PUT-MARKER-51aa"  # printed as two halves: the command does not hold it
COMMAND = (
    f"cat >/dev/null; : {COMMAND_MARKER}; printf '%s-%s' OUT-PUT MARKER-51aa >&2; "
    "printf '{\"continue\": true}'"
)
#: a second hook of the same source (so the two run side by side) that the sandbox fails
MISSING = "missing-program-3f1c --verbose"
#: quick batches and a short export timeout (the standard variables, honoured)
OTEL_ENV = {"OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
EVENT_SPANS = {
    "cloudrunner.front", "cloudrunner.admission", "cloudrunner.audit.sync", "cloudrunner.hook",
    "cloudrunner.merge",
}  # fmt: skip


def traced_daemon(
    tmp_path: Path, tracker: DockerTracker, endpoint: str
) -> tuple[Deployment, DaemonProcess]:
    tmp_path.chmod(0o755)
    deployed = make_deployment(tmp_path, tracker.worker_id)
    deployed.isolation = "session"
    hooks = {"version": 1, "hooks": {"beforeSubmitPrompt": [{"command": COMMAND},
                                                             {"command": MISSING}]}}  # fmt: skip
    (deployed.enterprise / "hooks.json").write_text(json.dumps(hooks))
    config = tmp_path / "config.toml"
    config.write_text(f'[telemetry]\notlp_endpoint = "{endpoint}"\n')
    daemon = daemon_process(
        [*deployed.flags(), "--config", str(config)],
        state=deployed.state,
        worker_id=deployed.worker_id,
        env=OTEL_ENV,
    )
    return deployed, daemon.start()


def prompt_event(deployed: Deployment, generation: str) -> dict[str, object]:
    return {**deployed.event("beforeSubmitPrompt", prompt=PROMPT), "generation_id": generation}


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as started:
        yield started


def of_trace(spans: list[ReceivedSpan], trace_id: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.trace_id == trace_id]


def fronts(spans: list[ReceivedSpan], generation: str) -> list[ReceivedSpan]:
    return [
        s for s in spans
        if s.name == "cloudrunner.front"
        and s.attributes.get("cloudrunner.generation_id") == generation
    ]  # fmt: skip


def whole_trace(spans: list[ReceivedSpan], generation: str) -> bool:
    """The event's front span and every span of its trace are there."""
    front = fronts(spans, generation)
    return bool(front) and {s.name for s in of_trace(spans, front[0].trace_id)} >= EVENT_SPANS


def test_each_event_is_one_trace_under_the_agents_parent_with_no_payload(
    tmp_path: Path, docker_tracker: DockerTracker, receiver: OtlpReceiver
) -> None:
    problem = missing_client()
    if problem is not None:
        pytest.fail(problem)
    deployed, daemon = traced_daemon(tmp_path, docker_tracker, receiver.url)
    try:
        env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path), "TRACEPARENT": TRACEPARENT}
        for client, generation in (("python", "gen-py"), ("compiled", "gen-go")):
            payload = json.dumps(prompt_event(deployed, generation)).encode()
            outcome = run_one(client, ["hook", "beforeSubmitPrompt"], payload, env)
            assert outcome.code == 0, outcome.stderr
            assert json.loads(outcome.stdout)["continue"] is True
        # a malformed traceparent, sent raw (the clients never send one): answered, a new
        # trace, and the front span says why
        with socket.socket(socket.AF_UNIX) as raw:
            raw.connect(str(daemon.socket_path))
            body = json.dumps(prompt_event(deployed, "gen-bad")).encode()
            raw.sendall(
                b"POST /v1/events/beforeSubmitPrompt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                b"traceparent: " + TRACEPARENT.upper().encode() + b"\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            answer = b"".join(iter(lambda: raw.recv(65536), b""))
        assert answer.startswith(b"HTTP/1.1 200 ")
        spans = receiver.wait_for(
            lambda s: all(whole_trace(s, g) for g in ("gen-py", "gen-go", "gen-bad"))
        )
    finally:
        daemon.stop()

    for generation in ("gen-py", "gen-go"):
        (front,) = fronts(spans, generation)
        assert front.trace_id == TRACE_ID and front.parent_span_id == PARENT_ID
        assert front.kind == 2  # SPAN_KIND_SERVER
        assert front.attributes["cloudrunner.conversation_id"] == "conv-1"
        assert front.attributes["cloudrunner.event"] == "beforeSubmitPrompt"
        assert front.attributes["http.route"] == "event"
        assert front.attributes["cloudrunner.admission.slot_wait_ms"] >= 0
        assert "cloudrunner.traceparent.rejected" not in front.attributes
        assert front.resource["service.name"] == "cloudrunner"
    (bad,) = fronts(spans, "gen-bad")
    assert bad.trace_id != TRACE_ID and bad.parent_span_id == ""
    assert "trace-id" in bad.attributes["cloudrunner.traceparent.rejected"]

    # one trace per event: the two clients' events share the agent's trace id, so each
    # event's spans are told apart by their front span
    for generation in ("gen-py", "gen-go", "gen-bad"):
        (front,) = fronts(spans, generation)
        mine = [s for s in of_trace(spans, front.trace_id)]
        under = _descendants(mine, front.span_id)
        assert {s.name for s in under} == EVENT_SPANS - {"cloudrunner.front"}
        syncs = sorted(
            s.attributes["cloudrunner.audit.records"]
            for s in under
            if s.name == "cloudrunner.audit.sync"
        )
        assert syncs == ["closing", "received"]
        hooks = {
            s.attributes["cloudrunner.hook.command_sha256"]: s.attributes
            for s in under
            if s.name == "cloudrunner.hook"
        }
        assert len(hooks) == 2  # both ran side by side, each under the event's front span
        ran = hooks[hashlib.sha256(COMMAND.encode()).hexdigest()]
        assert ran["cloudrunner.hook.source"] == "enterprise"
        assert ran["cloudrunner.hook.id"].startswith("enterprise:")
        assert ran["cloudrunner.hook.status"] == "ok"
        assert ran["cloudrunner.hook.exit_code"] == 0
        assert ran["cloudrunner.sandbox.image"] and ran["cloudrunner.sandbox.isolation"]
        assert "cloudrunner.hook.cause" not in ran
        failed = hooks[hashlib.sha256(MISSING.encode()).hexdigest()]
        assert failed["cloudrunner.hook.exit_code"] == 127
        assert failed["cloudrunner.hook.cause"] == "missing_program"

    exported = b"".join(receiver.bodies)
    for secret in (PROMPT, "hunter2", COMMAND_MARKER, OUTPUT_MARKER, "OUT-PUT", "3f1c"):
        assert secret.encode() not in exported, secret
    # the audit log has the events, and the hook did print its output there
    assert OUTPUT_MARKER in deployed.audit_log.read_text()


def _descendants(spans: list[ReceivedSpan], root: str) -> list[ReceivedSpan]:
    found: list[ReceivedSpan] = []
    parents = {root}
    changed = True
    while changed:
        changed = False
        for span in spans:
            if span.parent_span_id in parents and span.span_id not in parents:
                parents.add(span.span_id)
                found.append(span)
                changed = True
    return found


def test_a_hung_collector_loses_spans_counted_never_an_event(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    with otlp_receiver("hang") as hung:
        deployed, daemon = traced_daemon(tmp_path, docker_tracker, hung.url)
        try:
            for n in range(3):
                reply = daemon.event("beforeSubmitPrompt", prompt_event(deployed, f"gen-{n}"))
                assert reply.status == 200 and json.loads(reply.body)["continue"] is True
            hung.wait_requests(1)  # the exporter is in the collector, unanswered
            reply = daemon.event("beforeSubmitPrompt", prompt_event(deployed, "gen-while-hung"))
            assert reply.status == 200 and json.loads(reply.body)["continue"] is True
            dropped = _dropped_after(daemon, deadline_s=60)
        finally:
            daemon.stop()
    assert dropped >= 1  # the batch whose export timed out
    received = [r for r in deployed.records() if r.get("kind") == "decision"]
    assert len(received) == 4  # every event recorded and answered


def _dropped_after(daemon: DaemonProcess, deadline_s: float) -> float:
    """cloudrunner_trace_spans_dropped_total once it rose above 0 (the export times out
    after OTEL_EXPORTER_OTLP_TIMEOUT; the daemon is asked until then)."""

    def dropped() -> float:
        text = daemon.call("GET", "/metrics").body.decode()
        return value(text, "cloudrunner_trace_spans_dropped_total") or 0.0

    return sample_until(dropped, lambda n: n > 0, timeout_s=deadline_s, interval_s=0.2)


@pytest.mark.parametrize(
    ("config", "env", "named"),
    [
        ('[telemetry]\notlp_endpoint = "localhost:4318"\n', {}, "telemetry.otlp_endpoint"),
        ("", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://u:hunter2@c:4318"},
         "OTEL_EXPORTER_OTLP_ENDPOINT"),
    ],
)  # fmt: skip
def test_an_unusable_endpoint_stops_the_start_with_one_line(
    tmp_path: Path, config: str, env: dict[str, str], named: str
) -> None:
    settings = tmp_path / "config.toml"
    settings.write_text(config)
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "serve", "--config", str(settings),
         "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": "/usr/bin:/bin", **env},
    )  # fmt: skip
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cloudrunner: error: ") and named in lines[0]
    assert "hunter2" not in proc.stderr
    assert not (tmp_path / "state" / "cloudrunner.sock").exists()
