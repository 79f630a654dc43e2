"""The daemon's tracer provider. An event's thread only records its spans (`spans`) and
hands the finished tree to `Tracing.take`, which queues it; the builder thread here makes
the OpenTelemetry SDK's spans of it (times, parents and attributes as recorded), and the
SDK's BatchSpanProcessor hands them to its own thread, which sends them over OTLP/HTTP.

What cannot be delivered is dropped and counted, never waited for: the spans of an event
that finds the builder's queue full (BUILD_QUEUE traces), spans beyond the processor's queue
(OTEL_BSP_MAX_QUEUE_SIZE, 2048 by default) while the collector is slow, and every span of a
batch the collector did not take (unreachable, a timeout, an error status after the
exporter's retries). `Tracing.dropped` is that count (cloudrunner_trace_spans_dropped_total).
The exporter honours the standard variables (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
_COMPRESSION, _CERTIFICATE and their _TRACES_ forms), the processor OTEL_BSP_*, the provider
OTEL_TRACES_SAMPLER and OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cloudrunner.logs import get_logger
from cloudrunner.telemetry import spans
from cloudrunner.telemetry.endpoint import TelemetrySettings, resolve
from cloudrunner.version import VERSION

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.trace import Tracer

#: finished traces waiting for the builder thread at most
BUILD_QUEUE = 1024

_log = get_logger("cloudrunner.telemetry")

DEFAULT_QUEUE = 2048
#: the SDK's own lines about a failed export or a full queue: the counter and one line of
#: ours (when delivery starts failing and when it recovers) say it instead of one per batch
_QUIETED = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.sdk._shared_internal",
)


DEFAULT_BATCH = 512


def _positive(environ: Mapping[str, str], name: str, default: int) -> int:
    try:
        value = int(environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


#: at most one line a minute says that spans are being dropped
LOG_INTERVAL_S = 60.0


class _Delivery:
    """Counts what the exporter was handed, took and lost (one lock, a few integers)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.lock = threading.Lock()
        self.queued = 0  # forwarded to the batch processor
        self.handed = 0  # given to the exporter
        self.dropped = 0
        self.refused = False  # the last export failed
        self._said = -LOG_INTERVAL_S  # when the last "dropped" line was written

    def lost(self, count: int, why: str, *, export: bool = False) -> None:
        now = time.monotonic()
        with self.lock:
            self.dropped += count
            self.refused = self.refused or export
            say = now - self._said >= LOG_INTERVAL_S
            if say:
                self._said = now
        if say:
            _log.warning(
                "telemetry.spans_dropped",
                detail=f"spans are being dropped ({why}); events are answered as ever; "
                "cloudrunner_trace_spans_dropped_total counts them (this line comes at most "
                "once a minute)",
                endpoint=self.endpoint,
                dropped=self.dropped,
            )

    def delivered(self) -> None:
        if self.refused:  # the collector takes spans again after refusing them
            with self.lock:
                self.refused = False
            _log.warning("telemetry.spans_delivered", endpoint=self.endpoint)


def _exporter(inner: SpanExporter, delivery: _Delivery) -> SpanExporter:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Counting(SpanExporter):
        def export(self, batch: Sequence[ReadableSpan]) -> SpanExportResult:
            with delivery.lock:
                delivery.handed += len(batch)
            try:
                result = inner.export(batch)
            except Exception as exc:  # the processor would log and forget it
                delivery.lost(len(batch), f"the export failed: {type(exc).__name__}", export=True)
                return SpanExportResult.FAILURE
            if result is SpanExportResult.SUCCESS:
                delivery.delivered()
            else:
                delivery.lost(
                    len(batch),
                    f"the collector at {delivery.endpoint} did not take them",
                    export=True,
                )
            return result

        def shutdown(self) -> None:
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return inner.force_flush(timeout_millis)

    return Counting()


def _bounded(inner: SpanProcessor, delivery: _Delivery, limit: int) -> SpanProcessor:
    from opentelemetry.sdk.trace import SpanProcessor

    class Bounded(SpanProcessor):
        """Counts a span as dropped, instead of handing it on, when the processor's queue
        is full (the processor would drop the oldest without telling anyone)."""

        def on_start(self, span: Span, parent_context: Context | None = None) -> None:
            return None  # the batch processor does nothing on start

        def on_end(self, span: ReadableSpan) -> None:
            with delivery.lock:
                full = delivery.queued - delivery.handed >= limit
                if not full:
                    delivery.queued += 1
            if full:
                delivery.lost(1, "the queue is full: the collector is slow or hangs")
                return
            inner.on_end(span)

        def shutdown(self) -> None:
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return inner.force_flush(timeout_millis)

    return Bounded()


class Tracing:
    """The daemon's traces from `start` to `close`: the provider, installed as the tracer
    the event path's span helpers use."""

    def __init__(self, endpoint: str, worker_id: str, environ: Mapping[str, str]) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        for name in _QUIETED:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        self.endpoint = endpoint
        self._delivery = _Delivery(endpoint)
        limit = _positive(environ, "OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_QUEUE)
        # a batch larger than the queue is refused by the SDK: at most the queue
        batch_size = min(limit, _positive(environ, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH))
        attributes: dict[str, str] = {
            "service.version": VERSION,
            "service.instance.id": worker_id,
        }
        if not environ.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = "cloudrunner"
        self.provider = TracerProvider(resource=Resource.create(attributes))
        batch = BatchSpanProcessor(
            _exporter(OTLPSpanExporter(endpoint=endpoint), self._delivery),
            max_queue_size=limit,
            max_export_batch_size=batch_size,
        )
        self.provider.add_span_processor(_bounded(batch, self._delivery, limit))
        self._tracer = self.provider.get_tracer("cloudrunner", VERSION)
        self._traces: queue.Queue[spans.Recorded | None] = queue.Queue(BUILD_QUEUE)
        self._builder = threading.Thread(target=self._build, name="telemetry-build", daemon=True)
        self._builder.start()
        spans.install(self.take)

    @property
    def dropped(self) -> int:
        return self._delivery.dropped

    def take(self, trace: spans.Recorded) -> None:
        """Queue a finished trace for the builder (on the event's thread: never waits)."""
        try:
            self._traces.put_nowait(trace)
        except queue.Full:
            self._delivery.lost(_count(trace), "the traces wait for the builder thread")

    def settle(self) -> None:
        """Wait until every trace taken so far has been made into the SDK's spans."""
        self._traces.join()

    def _build(self) -> None:
        while True:
            trace = self._traces.get()
            try:
                if trace is None:
                    return
                _make(self._tracer, trace)
            except Exception as exc:  # a trace that cannot be made is lost, not the thread
                self._delivery.lost(_count(trace) if trace else 0, type(exc).__name__)
            finally:
                self._traces.task_done()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop tracing, send what is queued (for at most `timeout_s`), end the threads."""
        spans.install(None)
        done = threading.Event()

        def shut() -> None:
            self._traces.put(None)
            self._builder.join()
            self.provider.shutdown()
            done.set()

        # the SDK's shutdown waits on a hung collector for its whole export timeout
        threading.Thread(target=shut, name="telemetry-shutdown", daemon=True).start()
        done.wait(timeout_s)


def _count(trace: spans.Recorded) -> int:
    return 1 + sum(_count(child) for child in trace.children)


def _make(tracer: Tracer, trace: spans.Recorded) -> None:
    """The SDK's spans of a recorded trace, with its times, parents and attributes."""
    from opentelemetry import trace as api
    from opentelemetry.trace import Status, StatusCode

    context = None
    if trace.parent is not None:
        parent = trace.parent
        remote = api.SpanContext(
            parent.trace_id,
            parent.span_id,
            is_remote=True,
            trace_flags=api.TraceFlags(api.TraceFlags.SAMPLED if parent.sampled else 0),
        )
        context = api.set_span_in_context(api.NonRecordingSpan(remote))

    def make(node: spans.Recorded, context: Context | None, kind: api.SpanKind) -> None:
        if not node.end_ns:  # still running when its trace ended: nothing to say of it
            return
        made = tracer.start_span(
            node.name, context=context, kind=kind, attributes=node.attributes,
            start_time=node.start_ns, record_exception=False, set_status_on_exception=False,
        )  # fmt: skip
        if node.error is not None:
            made.set_attribute("error.type", node.error[0])
            if node.error[1]:
                made.set_attribute("cloudrunner.error_code", node.error[1])
            made.set_status(Status(StatusCode.ERROR))
        inner = api.set_span_in_context(made)
        for child in list(node.children):
            make(child, inner, api.SpanKind.INTERNAL)
        made.end(end_time=node.end_ns)

    make(trace, context, api.SpanKind.SERVER)


def start(
    settings: TelemetrySettings, worker_id: str, environ: Mapping[str, str] | None = None
) -> Tracing | None:
    """Tracing as the settings and the OTEL_* variables ask (None: off); TelemetryError
    when a variable's endpoint is unusable."""
    environ = os.environ if environ is None else environ
    endpoint = resolve(settings.otlp_endpoint, environ)
    if endpoint is None:
        return None
    return Tracing(endpoint, worker_id, environ)
