"""A real OTLP/HTTP trace receiver on loopback for the tracing tests: the bench's collector
(`bench.collector.Collector`: it takes `POST /v1/traces` as a collector does, and answers as
its `mode` says: "ok", "error" or "hang") decoding each body with the `opentelemetry-proto`
messages (ExportTraceServiceRequest), and keeping the raw bytes too so a test can search
them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from bench.collector import Collector, Mode


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # hex
    span_id: str
    parent_span_id: str  # "" for a root
    kind: int
    status_code: int
    attributes: dict[str, Any]
    resource: dict[str, Any]


def _value(value: AnyValue) -> Any:
    field = value.WhichOneof("value")
    return None if field is None else getattr(value, field)


class OtlpReceiver(Collector):
    def __init__(self, mode: Mode = "ok") -> None:
        super().__init__(mode)
        self.bodies: list[bytes] = []
        self._spans: list[ReceivedSpan] = []

    def _keep(self, path: str, body: bytes) -> None:
        decoded: list[ReceivedSpan] = []
        if path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        decoded.append(
                            ReceivedSpan(
                                span.name,
                                span.trace_id.hex(),
                                span.span_id.hex(),
                                span.parent_span_id.hex(),
                                span.kind,
                                span.status.code,
                                {a.key: _value(a.value) for a in span.attributes},
                                resource,
                            )
                        )
        self.bodies.append(body)
        self._spans.extend(decoded)

    def spans(self) -> list[ReceivedSpan]:
        with self._changed:
            return list(self._spans)

    def wait_for(
        self, done: Callable[[list[ReceivedSpan]], bool], timeout_s: float = 60.0
    ) -> list[ReceivedSpan]:
        """The spans once `done(spans)` holds; AssertionError after `timeout_s`."""
        with self._changed:
            if not self._changed.wait_for(lambda: done(self._spans), timeout_s):
                names = sorted({s.name for s in self._spans})
                raise AssertionError(f"the receiver has {len(self._spans)} span(s): {names}")
            return list(self._spans)


@contextmanager
def otlp_receiver(mode: Mode = "ok") -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver(mode)
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()
