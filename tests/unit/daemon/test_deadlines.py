"""The threaded front's deadlines (`cloudrunner.daemon.deadlines`), with its real timer
thread: due ones are handed over once, in order (a bucket apart); replaced and cancelled
ones never, and they keep no reference to what they were for."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Callable

from cloudrunner.daemon.deadlines import Deadlines
from tests.support.waiting import came_true


class _Conn:
    """A connection as the deadlines see it: any object, kept by weak reference."""


def _until(condition: Callable[[], object], timeout_s: float = 30.0) -> bool:
    return came_true(condition, timeout_s, interval_s=0.01)


def test_due_deadlines_come_in_order_and_replaced_ones_never() -> None:
    fired: list[tuple[str, float]] = []
    lock = threading.Lock()

    def expire(name: str, when: float) -> None:
        with lock:
            fired.append((name, when))

    deadlines: Deadlines[str] = Deadlines(expire, "test-deadlines")
    try:
        now = time.monotonic()
        deadlines.arm("late", now + 0.9)
        deadlines.arm("replaced", now + 0.05)
        deadlines.arm("replaced", now + 0.6)  # later than the one it replaces
        deadlines.arm("early", now + 0.3)  # earlier than what the timer waits for
        deadlines.arm("cancelled", now + 0.01)
        deadlines.cancel("cancelled")
        assert _until(lambda: len(fired) == 3)
        assert [name for name, _ in fired] == ["early", "replaced", "late"]
        assert fired[1][1] == now + 0.6
        assert len(deadlines) == 0
    finally:
        deadlines.stop()


def test_a_cancelled_deadline_holds_no_reference() -> None:
    deadlines: Deadlines[_Conn] = Deadlines(lambda conn, when: None, "test-deadlines")
    try:
        conn = _Conn()
        ref = weakref.ref(conn)
        deadlines.arm(conn, time.monotonic() + 600)
        deadlines.arm(conn, time.monotonic() + 700)
        deadlines.cancel(conn)
        del conn
        gc.collect()
        assert ref() is None, "a closed connection with a far deadline is not held"
    finally:
        deadlines.stop()
