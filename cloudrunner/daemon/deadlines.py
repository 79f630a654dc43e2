"""Deadlines for the threaded front's connections, kept by one timer thread: the header,
body and keep-alive deadlines of connections no thread is reading (a thread that is
reading one checks its deadline itself when it lets go).

Deadlines fall into buckets of `GRAIN` seconds (a connection may be closed up to that much
after its deadline): arming one, replacing it or dropping it (`cancel`, when the connection
closes) is a set operation, and the timer wakes at most once per bucket, however many
requests arm a deadline meanwhile; a dropped deadline keeps no reference to its connection.
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

C = TypeVar("C", bound=Hashable)

#: the timer's resolution, in seconds
GRAIN = 0.1


class Deadlines(Generic[C]):
    def __init__(self, expire: Callable[[C, float], None], name: str) -> None:
        self._expire = expire
        self._buckets: dict[int, set[C]] = {}
        self._ticks: list[int] = []  # the buckets' ticks, a heap
        self._due: dict[C, tuple[int, float]] = {}
        self._wake = threading.Condition()
        self._wake_at = math.inf
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def __len__(self) -> int:
        """Deadlines armed and not yet due or cancelled."""
        return len(self._due)

    def arm(self, item: C, when: float) -> None:
        """Hand `item` to `expire(item, when)` once the monotonic clock passes `when` (give
        or take `GRAIN`), instead of the deadline it had."""
        tick = math.ceil(when / GRAIN)
        with self._wake:
            old = self._due.get(item)
            if old is not None and old[0] != tick:
                self._buckets[old[0]].discard(item)
            self._due[item] = (tick, when)
            bucket = self._buckets.get(tick)
            if bucket is None:
                bucket = self._buckets[tick] = set()
                heapq.heappush(self._ticks, tick)
                if tick * GRAIN < self._wake_at:
                    self._wake.notify()
            bucket.add(item)

    def cancel(self, item: C) -> None:
        with self._wake:
            old = self._due.pop(item, None)
            if old is not None:
                self._buckets[old[0]].discard(item)

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._buckets.clear()
            self._ticks.clear()
            self._due.clear()
            self._wake.notify()
        self._thread.join(10)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopped:
                    now = time.monotonic()
                    if self._ticks and self._ticks[0] * GRAIN <= now:
                        break
                    self._wake_at = self._ticks[0] * GRAIN if self._ticks else math.inf
                    self._wake.wait(self._wake_at - now if self._ticks else None)
                self._wake_at = -math.inf  # awake: arming need not wake it
                if self._stopped:
                    return
                tick = heapq.heappop(self._ticks)
                due = [(item, self._due.pop(item)[1]) for item in self._buckets.pop(tick)]
            for item, when in due:
                self._expire(item, when)
