"""The provider against a real OTLP/HTTP receiver on loopback (the SDK's exporter on the
wire, the receiver decoding with opentelemetry-proto): spans arrive with their parent and
attributes; a collector that answers 500 or hangs loses spans, counted, and never holds up
the thread that made them."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator

import pytest

from cloudrunner import telemetry
from cloudrunner.telemetry import TelemetrySettings, Tracing
from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
#: fast batches and a short export timeout, as an operator may set them
ENV = {"OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}


@pytest.fixture
def tracing_to(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Tracing]]:
    for name, value in ENV.items():  # the SDK reads them from the process's environment
        monkeypatch.setenv(name, value)
    made: list[Tracing] = []
    yield made
    for tracing in made:
        tracing.close(timeout_s=5)


def start(receiver: OtlpReceiver, made: list[Tracing], **env: str) -> Tracing:
    """Tracing to `receiver`; `env`: the variables the provider itself reads."""
    tracing = telemetry.start(TelemetrySettings(otlp_endpoint=receiver.url), "worker-1", env)
    assert tracing is not None
    made.append(tracing)
    return tracing


def one_event(route: str = "event", traceparent: str | None = PARENT) -> None:
    with telemetry.front(traceparent, route):
        telemetry.event_ids("stop", {"conversation_id": "c-1", "generation_id": "g-1"})
        with telemetry.span("merge"):
            pass

        def hook() -> None:
            with telemetry.hook("team", "team:/h.json#/hooks/stop/0", "echo s3cr3t") as span:
                telemetry.hook_ran(span, "ok", 0, None, {"image": "img:1", "env": "X=1"})

        worker = threading.Thread(target=telemetry.carry(hook))
        worker.start()
        worker.join()


def test_an_event_is_one_trace_under_the_clients_parent(tracing_to: list[Tracing]) -> None:
    with otlp_receiver() as receiver:
        start(receiver, tracing_to)
        one_event()
        spans = receiver.wait_for(lambda s: len(s) >= 3)
    by_name = {s.name: s for s in spans}
    front = by_name["cloudrunner.front"]
    assert front.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert front.parent_span_id == "b7ad6b7169203331"
    assert front.attributes["cloudrunner.conversation_id"] == "c-1"
    assert front.attributes["cloudrunner.generation_id"] == "g-1"
    assert front.resource["service.name"] == "cloudrunner"
    assert front.resource["service.instance.id"] == "worker-1"
    for name in ("cloudrunner.merge", "cloudrunner.hook"):
        assert by_name[name].trace_id == front.trace_id
        assert by_name[name].parent_span_id == front.span_id  # the thread carried the span
    hook = by_name["cloudrunner.hook"].attributes
    assert hook["cloudrunner.hook.command_sha256"] == hashlib.sha256(b"echo s3cr3t").hexdigest()
    assert hook["cloudrunner.sandbox.image"] == "img:1"
    assert "cloudrunner.sandbox.env" not in hook
    assert not any(b"s3cr3t" in body for body in receiver.bodies)


def test_a_malformed_traceparent_starts_a_new_trace_and_says_why(
    tracing_to: list[Tracing],
) -> None:
    with otlp_receiver() as receiver:
        start(receiver, tracing_to)
        one_event(traceparent="00-not-a-trace-01\r\nx-evil: 1")
        spans = receiver.wait_for(lambda s: any(x.name == "cloudrunner.front" for x in s))
    front = next(s for s in spans if s.name == "cloudrunner.front")
    assert front.parent_span_id == ""
    assert "traceparent" in front.attributes["cloudrunner.traceparent.rejected"]
    assert not any(b"x-evil" in body for body in receiver.bodies)


def test_an_error_marks_the_span_by_type_and_code_never_its_message(
    tracing_to: list[Tracing],
) -> None:
    class Refused(Exception):
        code = "payload_invalid"

    with otlp_receiver() as receiver:
        start(receiver, tracing_to)
        with pytest.raises(Refused), telemetry.front(None, "event"):
            raise Refused("the prompt 'hunter2' is not JSON")
        spans = receiver.wait_for(lambda s: len(s) >= 1)
    assert spans[0].status_code == 2  # STATUS_CODE_ERROR
    assert spans[0].attributes["error.type"] == "Refused"
    assert spans[0].attributes["cloudrunner.error_code"] == "payload_invalid"
    assert not any(b"hunter2" in body for body in receiver.bodies)


def test_a_collector_answering_500_loses_spans_counted(tracing_to: list[Tracing]) -> None:
    with otlp_receiver("error") as receiver:
        tracing = start(receiver, tracing_to)
        one_event()
        receiver.wait_requests(1)
        tracing.close()  # the export thread has ended: its answer is counted
    assert len(receiver.spans()) == 3  # they reached the collector, which refused them
    assert tracing.dropped == 3


def test_a_hung_collector_never_holds_up_an_event(tracing_to: list[Tracing]) -> None:
    with otlp_receiver("hang") as receiver:
        tracing = start(receiver, tracing_to, OTEL_BSP_MAX_QUEUE_SIZE="8")
        one_event()
        receiver.wait_requests(1)  # the exporter's thread is stuck in the collector now
        for _ in range(20):  # each makes 3 spans; the queue holds 8
            one_event()
        tracing.settle()  # every trace made into the SDK's spans (by the builder thread)
        # all twenty events ended while the one export was still unanswered
        assert receiver.requests == 1
        assert tracing.dropped == 20 * 3 - 8
