"""An OTLP/HTTP collector on loopback: it takes `POST /v1/traces` and counts what it got
(requests, and bytes as sent); it decodes nothing. The tracing rows use it as it is; the
tests' receiver (tests/support/otlp_receiver.py) is this one keeping and decoding each body
as well. It lives here, not in tests/, because the bench is a tool that does not import the
tests (they import it).

`mode` says how it answers: "ok" (200, an empty ExportTraceServiceResponse: no bytes), "error"
(500) or "hang" (reads the request and answers nothing until `release()` or `stop()`)."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, get_args

Mode = Literal["ok", "error", "hang"]


class Collector:
    def __init__(self, mode: Mode = "ok") -> None:
        if mode not in get_args(Mode):
            raise ValueError(f"a collector answers {' or '.join(get_args(Mode))}, not {mode!r}")
        self.mode = mode
        self.requests = 0
        self.bytes = 0
        self._changed = threading.Condition()
        self._release = threading.Event()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                sent = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                gzipped = self.headers.get("Content-Encoding") == "gzip"
                collector._take(self.path, gzip.decompress(sent) if gzipped else sent, len(sent))
                if collector.mode == "hang":
                    collector._release.wait(120)
                    self.close_connection = True
                    return
                # an empty ExportTraceServiceResponse serialises to no bytes at all
                self.send_response(200 if collector.mode == "ok" else 500)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _take(self, path: str, body: bytes, sent: int) -> None:
        with self._changed:
            self._keep(path, body)
            self.requests += 1
            self.bytes += sent
            self._changed.notify_all()

    def _keep(self, path: str, body: bytes) -> None:
        """What is kept of a request to `path` besides its count, under the collector's lock
        (nothing here: a subclass decodes `body`, decompressed if it was gzipped)."""

    def wait_requests(self, count: int, timeout_s: float = 60.0) -> None:
        """Return once `count` requests have come; AssertionError after `timeout_s`."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.requests >= count, timeout_s):
                raise AssertionError(f"the receiver had {self.requests} request(s), not {count}")

    def release(self) -> None:
        """Let the requests a hanging collector holds go (unanswered)."""
        self._release.set()

    def start(self) -> Collector:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
