"""Deadlines for the threaded front's connections, kept by one timer thread: the header,
body and keep-alive deadlines of connections no thread is reading (a thread that is
reading one checks its deadline itself when it lets go).

Each connection has at most one deadline: `arm` replaces the one before, `cancel` (when the
connection closes) drops it, and a replaced or dropped entry keeps no reference to its
connection (a crowd of closed connections with long deadlines is not held until they come
due). The timer is woken only by a deadline earlier than the one it waits for, so arming
one for every request, each later than the last, costs no wake-up.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

C = TypeVar("C", bound=Hashable)


class _Entry(Generic[C]):
    __slots__ = ("item",)

    def __init__(self, item: C) -> None:
        self.item: C | None = item


class Deadlines(Generic[C]):
    def __init__(self, expire: Callable[[C, float], None], name: str) -> None:
        self._expire = expire
        self._heap: list[tuple[float, int, _Entry[C]]] = []
        self._live: dict[C, _Entry[C]] = {}
        self._serial = itertools.count()
        self._wake = threading.Condition()
        self._wake_at = float("inf")
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def __len__(self) -> int:
        """Deadlines armed and not yet due, replaced or cancelled."""
        return len(self._live)

    def arm(self, item: C, when: float) -> None:
        """Hand `item` to `expire(item, when)` once the monotonic clock passes `when`
        (instead of the deadline it had)."""
        entry = _Entry(item)
        with self._wake:
            old = self._live.get(item)
            if old is not None:
                old.item = None
            self._live[item] = entry
            heapq.heappush(self._heap, (when, next(self._serial), entry))
            if when < self._wake_at:
                self._wake.notify()

    def cancel(self, item: C) -> None:
        with self._wake:
            entry = self._live.pop(item, None)
            if entry is not None:
                entry.item = None

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._heap.clear()
            self._live.clear()
            self._wake.notify()
        self._thread.join(10)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopped:
                    while self._heap and self._heap[0][2].item is None:
                        heapq.heappop(self._heap)  # replaced or cancelled
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        break
                    self._wake_at = self._heap[0][0] if self._heap else float("inf")
                    self._wake.wait(self._wake_at - now if self._heap else None)
                self._wake_at = float("-inf")  # busy: no need to wake it
                if self._stopped:
                    return
                when, _, entry = heapq.heappop(self._heap)
                item = entry.item
                assert item is not None
                entry.item = None
                del self._live[item]
            self._expire(item, when)
