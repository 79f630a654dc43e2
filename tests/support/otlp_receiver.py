"""A real OTLP/HTTP trace receiver on loopback for the tracing tests: it takes
`POST /v1/traces` as a collector does and decodes each body with the `opentelemetry-proto`
messages (ExportTraceServiceRequest), keeping the raw bytes too so a test can search them.

`mode` says how it answers: "ok" (200, an empty ExportTraceServiceResponse), "error" (500)
or "hang" (reads the request and answers nothing until `release()` or `stop()`)."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


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


class OtlpReceiver:
    def __init__(self, mode: str = "ok") -> None:
        assert mode in ("ok", "error", "hang")
        self.mode = mode
        self.bodies: list[bytes] = []
        self.requests = 0
        self._spans: list[ReceivedSpan] = []
        self._changed = threading.Condition()
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver._take(self.path, body)
                if receiver.mode == "hang":
                    receiver._release.wait(120)
                    self.close_connection = True
                    return
                status = 200 if receiver.mode == "ok" else 500
                answer = ExportTraceServiceResponse().SerializeToString() if status == 200 else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _take(self, path: str, body: bytes) -> None:
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
        with self._changed:
            self.requests += 1
            self.bodies.append(body)
            self._spans.extend(decoded)
            self._changed.notify_all()

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

    def wait_requests(self, count: int, timeout_s: float = 60.0) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.requests >= count, timeout_s), (
                f"the receiver had {self.requests} request(s), not {count}"
            )

    def release(self) -> None:
        self._release.set()

    def start(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


@contextmanager
def otlp_receiver(mode: str = "ok") -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver(mode).start()
    try:
        yield receiver
    finally:
        receiver.stop()
