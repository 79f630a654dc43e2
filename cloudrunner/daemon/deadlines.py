"""Deadlines for the threaded front's connections, kept by one timer thread: the header,
body and keep-alive deadlines of connections no thread is reading (a thread that is
reading one checks its deadline itself when it lets go).

A connection's deadline is whatever it set last (`arm`); older entries in the heap are
passed over when they come due. Due ones are handed to `expire`, which decides.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

C = TypeVar("C")


class Deadlines(Generic[C]):
    def __init__(self, expire: Callable[[C, float], None], name: str) -> None:
        self._expire = expire
        self._heap: list[tuple[float, int, C]] = []
        self._serial = itertools.count()
        self._wake = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def arm(self, conn: C, when: float) -> None:
        """Hand `conn` to `expire(conn, when)` once the monotonic clock passes `when`."""
        with self._wake:
            heapq.heappush(self._heap, (when, next(self._serial), conn))
            if self._heap[0][2] is conn:
                self._wake.notify()

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._heap.clear()
            self._wake.notify()
        self._thread.join(10)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopped:
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        break
                    self._wake.wait(self._heap[0][0] - now if self._heap else None)
                if self._stopped:
                    return
                when, _, conn = heapq.heappop(self._heap)
            self._expire(conn, when)
