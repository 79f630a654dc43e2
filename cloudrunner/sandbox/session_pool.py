"""Warm session sandboxes, one per (workspace, session, source), shared by a worker's threads.

The daemon keeps them between events: a sandbox idle longer than `idle_timeout_s` is closed
by `sweep()`, and when more than `max_warm` are open the least recently used idle ones are
closed. A sandbox in use (borrowed for an event) is never closed under its run; a sandbox
whose container died replaces it by itself on its next run (`SessionSandbox`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import docker

from cloudrunner.closing import ClosesOnExit
from cloudrunner.sandbox import engine
from cloudrunner.sandbox.base import ExecRequest, ExecResult, SandboxSpec
from cloudrunner.sandbox.session_sandbox import SessionSandbox

_Key = tuple[Path, str, str]


@dataclass
class _Entry:
    sandbox: SessionSandbox
    last_used: float
    borrowed: int = 0


class SessionPool(ClosesOnExit):
    """Hands out the warm `SessionSandbox` of a (workspace, session, source), making it on
    first use.

    A spec that changed for a key (a reloaded profile, another image) closes the old
    sandbox and opens a new one, so a changed configuration never runs in a stale container.
    """

    def __init__(
        self,
        client: docker.DockerClient | engine.EngineLink | None = None,
        *,
        start_timeout_s: float = 60.0,
        wedge_grace_s: float = 15.0,
        max_warm: int | None = None,
        idle_timeout_s: float | None = None,
    ) -> None:
        self._link = client if isinstance(client, engine.EngineLink) else engine.EngineLink(client)
        self._lock = threading.Lock()
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self._start_timeout = start_timeout_s
        self._grace = wedge_grace_s
        self._max_warm = max_warm
        self._idle_timeout = idle_timeout_s
        self._closed = False
        self.evicted = 0

    def get(self, spec: SandboxSpec) -> SessionSandbox:
        """The warm sandbox for `spec` (not borrowed: use `borrow` when the pool may evict)."""
        return self._take(spec, borrow=False)

    def borrow(self, spec: SandboxSpec) -> Borrowed:
        """The warm sandbox for `spec`, held so that eviction skips it until `close()`."""
        return Borrowed(self, self._take(spec, borrow=True), _key(spec))

    def _take(self, spec: SandboxSpec, *, borrow: bool) -> SessionSandbox:
        key = _key(spec)
        closing: list[SessionSandbox] = []
        with self._lock:
            if self._closed:
                raise RuntimeError("the session pool is closed")
            entry = self._entries.get(key)
            if entry is not None and entry.sandbox.spec != spec:
                # a borrowed one is closed when it is given back (see _give_back)
                if entry.borrowed == 0:
                    closing.append(entry.sandbox)
                entry = None
            if entry is None:
                entry = _Entry(
                    SessionSandbox(
                        spec,
                        self._link,
                        start_timeout_s=self._start_timeout,
                        wedge_grace_s=self._grace,
                    ),
                    time.monotonic(),
                )
                self._entries[key] = entry
            entry.last_used = time.monotonic()
            if borrow:
                entry.borrowed += 1
            self._entries.move_to_end(key)
            closing.extend(self._over_cap(keep=key))
        for sandbox in closing:
            sandbox.close()
        return entry.sandbox

    def _give_back(self, key: _Key, sandbox: SessionSandbox) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.sandbox is sandbox:
                entry.borrowed = max(0, entry.borrowed - 1)
                entry.last_used = time.monotonic()
                return
        # replaced while borrowed (its spec changed): nobody else holds it now
        sandbox.close()

    def _over_cap(self, keep: _Key) -> list[SessionSandbox]:
        """Least recently used idle sandboxes beyond `max_warm`, never `keep` (the one just
        handed out); the lock is held."""
        if self._max_warm is None or len(self._entries) <= self._max_warm:
            return []
        out: list[SessionSandbox] = []
        for key, entry in list(self._entries.items()):
            if len(self._entries) <= self._max_warm:
                break
            if entry.borrowed == 0 and key != keep:
                del self._entries[key]
                out.append(entry.sandbox)
                self.evicted += 1
        return out

    def sweep(self, now: float | None = None) -> int:
        """Close the sandboxes idle longer than the idle timeout; how many were closed."""
        if self._idle_timeout is None:
            return 0
        now = time.monotonic() if now is None else now
        with self._lock:
            stale = [
                key
                for key, entry in self._entries.items()
                if entry.borrowed == 0 and now - entry.last_used > self._idle_timeout
            ]
            closing = [self._entries.pop(key).sandbox for key in stale]
        for sandbox in closing:
            sandbox.close()
        return len(closing)

    def close_session(self, session: str) -> int:
        """Close every sandbox of a session (it ended); how many there were."""
        with self._lock:
            keys = [k for k in self._entries if k[1] == session]
            closing = [self._entries.pop(k).sandbox for k in keys]
        for sandbox in closing:
            sandbox.close()
        return len(closing)

    def close_workspace(self, root: Path) -> int:
        """Close every sandbox over a workspace (its daemon session was closed)."""
        with self._lock:
            keys = [k for k in self._entries if k[0] == root]
            closing = [self._entries.pop(k).sandbox for k in keys]
        for sandbox in closing:
            sandbox.close()
        return len(closing)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            closing = [entry.sandbox for entry in self._entries.values()]
            self._entries.clear()
        for sandbox in closing:
            sandbox.close()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class Borrowed(ClosesOnExit):
    """A pooled sandbox lent for one event: `close()` gives it back instead of closing it."""

    def __init__(self, pool: SessionPool, sandbox: SessionSandbox, key: _Key) -> None:
        self._pool = pool
        self._sandbox = sandbox
        self._key = key
        self._returned = False

    @property
    def sandbox_id(self) -> str:
        return self._sandbox.sandbox_id

    def run(self, request: ExecRequest) -> ExecResult:
        return self._sandbox.run(request)

    def close(self) -> None:
        if not self._returned:
            self._returned = True
            self._pool._give_back(self._key, self._sandbox)


def _key(spec: SandboxSpec) -> _Key:
    return (spec.workspace, spec.labels.session, spec.labels.source)
