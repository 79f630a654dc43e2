"""A real HTTP git server on 127.0.0.1: git http-backend as CGI behind Basic auth."""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _GitHTTPServer(ThreadingHTTPServer):
    project_root: Path
    expected_auth: str
    seen_auth: list[str | None]


class _GitHandler(BaseHTTPRequestHandler):
    """git http-backend as CGI, behind a Basic auth check."""

    server: _GitHTTPServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        auth = self.headers.get("Authorization")
        self.server.seen_auth.append(auth)
        if auth != self.server.expected_auth:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": str(self.server.project_root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "tester",
            "REMOTE_ADDR": "127.0.0.1",
        }
        for header, var in (
            ("Git-Protocol", "GIT_PROTOCOL"),
            ("Content-Encoding", "HTTP_CONTENT_ENCODING"),
        ):
            if self.headers.get(header):
                env[var] = self.headers[header]
        out = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        ).stdout
        sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
        head, _, payload = out.partition(sep)
        status = 200
        headers: list[tuple[str, str]] = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@dataclass
class GitServer:
    base: str
    server: _GitHTTPServer

    def url(self, name: str, userinfo: str = "") -> str:
        return f"http://{userinfo}{self.base}/{name}"


@contextmanager
def serve_git(project_root: Path, user: str, secret: str) -> Iterator[GitServer]:
    """Serve the repositories under `project_root`; only `user:secret` may read them."""
    server = _GitHTTPServer(("127.0.0.1", 0), _GitHandler)
    server.project_root = project_root
    server.expected_auth = "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
    server.seen_auth = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield GitServer(f"127.0.0.1:{server.server_address[1]}", server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
