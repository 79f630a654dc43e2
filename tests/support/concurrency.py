"""Concurrent requests in tests: one call per thread, every exception kept."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_in_threads(
    count: int, call: Callable[[int], object], timeout_s: float = 600.0
) -> list[BaseException]:
    """`call(0)` ... `call(count - 1)`, each in its own thread, all started before any is
    joined; the exceptions they raised (the caller asserts on them)."""
    failures: list[BaseException] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        try:
            call(index)
        except BaseException as exc:  # collected for the caller
            with lock:
                failures.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout_s)
    return failures
