"""Warm session sandboxes, one per (session, source), shared by the worker's threads."""

from __future__ import annotations

import threading

import docker

from cloudrunner.closing import ClosesOnExit
from cloudrunner.sandbox import engine
from cloudrunner.sandbox.base import SandboxSpec
from cloudrunner.sandbox.session_sandbox import SessionSandbox


class SessionPool(ClosesOnExit):
    """Hands out the warm `SessionSandbox` of a (session, source), making it on first use.

    A spec that changed for a key (a reloaded profile, another workspace) closes the old
    sandbox and opens a new one, so a changed configuration never runs in a stale container.
    """

    def __init__(
        self,
        client: docker.DockerClient | engine.EngineLink | None = None,
        *,
        start_timeout_s: float = 60.0,
        wedge_grace_s: float = 15.0,
    ) -> None:
        self._link = client if isinstance(client, engine.EngineLink) else engine.EngineLink(client)
        self._lock = threading.Lock()
        self._sandboxes: dict[tuple[str, str], SessionSandbox] = {}
        self._start_timeout = start_timeout_s
        self._grace = wedge_grace_s
        self._closed = False

    def get(self, spec: SandboxSpec) -> SessionSandbox:
        key = (spec.labels.session, spec.labels.source)
        stale: SessionSandbox | None = None
        with self._lock:
            if self._closed:
                raise RuntimeError("the session pool is closed")
            sandbox = self._sandboxes.get(key)
            if sandbox is not None and sandbox.spec == spec:
                return sandbox
            stale = sandbox
            sandbox = SessionSandbox(
                spec, self._link, start_timeout_s=self._start_timeout, wedge_grace_s=self._grace
            )
            self._sandboxes[key] = sandbox
        if stale is not None:
            stale.close()
        return sandbox

    def close_session(self, session: str) -> int:
        """Close every sandbox of a session (it ended); how many there were."""
        with self._lock:
            keys = [k for k in self._sandboxes if k[0] == session]
            closing = [self._sandboxes.pop(k) for k in keys]
        for sandbox in closing:
            sandbox.close()
        return len(closing)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            closing = list(self._sandboxes.values())
            self._sandboxes.clear()
        for sandbox in closing:
            sandbox.close()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sandboxes)
