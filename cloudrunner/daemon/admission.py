"""Which events the daemon takes, and when a drain may end: the events waiting for a slot
(`server.max_concurrent_events`) and those in flight, counted under one lock, and the
shutdown state (as uvicorn's `ServerState` counts connections and tasks for its server).

An event is counted from the moment its body is read (`queue`), so a drain that starts
while it waits for its thread still waits for it; `slot()` holds one of the slots while it
runs. New events are refused (`DaemonError`, code `draining`) once a drain began.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from cloudrunner.daemon.request_errors import draining
from cloudrunner.telemetry import waited


class Admission:
    def __init__(self, max_concurrent_events: int) -> None:
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_concurrent_events)
        self._idle = threading.Condition(self._lock)
        self._waiting = 0
        self._in_flight = 0
        self._draining = False

    @property
    def waiting(self) -> int:
        """Events counted but not yet holding a slot."""
        return self._waiting

    @property
    def in_flight(self) -> int:
        """Events holding a slot."""
        return self._in_flight

    @property
    def draining(self) -> bool:
        return self._draining

    def queue(self) -> None:
        """Count an event as waiting for a slot; DaemonError (draining) once a drain began."""
        with self._lock:
            if self._draining:
                raise draining()
            self._waiting += 1

    def unqueue(self) -> None:
        """Undo `queue` for an event that will not run after all."""
        with self._idle:
            self._waiting -= 1
            self._idle.notify_all()

    @contextmanager
    def slot(self, queued: bool = False) -> Iterator[None]:
        """Hold a slot while the block runs (`queued`: `queue` was called for this event)."""
        if not queued:
            self.queue()
        asked = time.monotonic()
        self._slots.acquire()
        waited("cloudrunner.admission.slot_wait_ms", asked)  # on the event's trace, if any
        with self._lock:
            self._waiting -= 1
            self._in_flight += 1
        try:
            yield
        finally:
            self._slots.release()
            with self._idle:
                self._in_flight -= 1
                if self._draining:  # only a drain waits for the count to fall
                    self._idle.notify_all()

    def drain(self, timeout_s: float) -> bool:
        """Refuse new events and wait for those counted; True when all finished in time."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            self._draining = True
            while self._in_flight or self._waiting:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True
