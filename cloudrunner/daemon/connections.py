"""Per-listener connection bounds (`ConnectionBook`), independent of the HTTP server.

At `max_connections` a new connection takes the place of the longest-idle one (no request in
progress); when every connection is busy, the new one is closed. On TCP, a connection counts
as *unauthenticated* until a request with the right bearer token arrives (checked when its
headers are complete, before anything else); unauthenticated connections have a bound of their
own (`max_unauthenticated`, the oldest closed for the newest) and never count against
`max_connections`, so they cannot take what token holders need. The fronts that consult the
book are daemon/uvicorn_front.py and daemon/thread_front.py (which calls it from several
threads, under a lock of its own).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Protocol


class Connection(Hashable, Protocol):
    """What the book needs of a connection: to close it, saying why."""

    def close(self, reason: str) -> None: ...


@dataclass(frozen=True)
class Limits:
    header_timeout_s: float
    body_timeout_s: float
    max_header_bytes: int
    keepalive_max_requests: int
    max_connections: int
    max_unauthenticated: int


@dataclass
class ConnectionBook:
    """One listener's connections: unauthenticated (TCP before the token), idle, busy."""

    limits: Limits
    token: str | None = None
    unauthenticated: OrderedDict[Connection, None] = field(default_factory=OrderedDict)
    idle: OrderedDict[Connection, None] = field(default_factory=OrderedDict)
    busy: set[Connection] = field(default_factory=set)
    evicted: int = 0
    refused: int = 0
    highest: int = 0
    """the most connections open at once since `take_highest` was last called"""

    def __len__(self) -> int:
        return len(self.unauthenticated) + len(self.idle) + len(self.busy)

    def take_highest(self) -> int:
        highest, self.highest = max(self.highest, len(self)), len(self)
        return highest

    def admit(self, conn: Connection) -> bool:
        """A new connection: False when it must be closed at once."""
        if self.token is not None:
            if len(self.unauthenticated) >= self.limits.max_unauthenticated:
                self._evict(self.unauthenticated)
            self.unauthenticated[conn] = None
            self.highest = max(self.highest, len(self))
            return True
        if not self._room():
            return False
        self.idle[conn] = None
        self.highest = max(self.highest, len(self))
        return True

    def authenticated(self, conn: Connection) -> bool:
        """The connection sent the right token: False when there is no room for it."""
        if conn not in self.unauthenticated:
            return True
        del self.unauthenticated[conn]
        if not self._room():
            return False
        self.idle[conn] = None
        return True

    def started(self, conn: Connection) -> None:
        if self.idle.pop(conn, False) is None:
            self.busy.add(conn)

    def finished(self, conn: Connection) -> None:
        if conn in self.busy:
            self.busy.discard(conn)
            self.idle[conn] = None

    def forget(self, conn: Connection) -> None:
        self.unauthenticated.pop(conn, None)
        self.idle.pop(conn, None)
        self.busy.discard(conn)

    def _room(self) -> bool:
        if len(self.idle) + len(self.busy) < self.limits.max_connections:
            return True
        if self.idle:
            self._evict(self.idle)
            return True
        self.refused += 1
        return False

    def _evict(self, group: OrderedDict[Connection, None]) -> None:
        oldest, _ = group.popitem(last=False)
        self.evicted += 1
        oldest.close("evicted: the listener is at its connection cap")
