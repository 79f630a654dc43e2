"""A bounded pool of worker threads that shrinks when idle.

The docker SDK blocks, so hooks run in threads; the event loop only waits for them. Unlike
`concurrent.futures.ThreadPoolExecutor`, whose threads live as long as the pool, a thread
here exits after `idle_s` without work, so the thread count returns to its idle level after
a burst.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class _LoopWaiter:
    """Where a result goes on an event loop: its asyncio future, settled on the loop."""

    __slots__ = ("future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()

    def deliver(self, ok: bool, value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            self.loop.call_soon_threadsafe(_settle, self.future, ok, value)


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # the awaiting task was cancelled
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


_Item = tuple["concurrent.futures.Future[Any] | _LoopWaiter", Callable[..., Any], tuple[Any, ...]]


class ElasticPool:
    """At most `max_threads` threads; work waits in a FIFO queue when all are busy."""

    def __init__(self, max_threads: int, *, idle_s: float = 5.0, name: str = "worker") -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self.max_threads = max_threads
        self.idle_s = idle_s
        self.name = name
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self._idle = 0
        self._queued = 0
        self._serial = 0
        self._closed = False

    @property
    def threads(self) -> int:
        with self._lock:
            return len(self._threads)

    @property
    def queued(self) -> int:
        """Work items not yet taken by a thread."""
        with self._lock:
            return self._queued

    def submit(self, func: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._put(future, func, args)
        return future

    def submit_to_loop(
        self, loop: asyncio.AbstractEventLoop, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        """Run `func(*args)` on a thread; its result settles the asyncio future returned
        (on `loop`, by one `call_soon_threadsafe`): the one hand-off back to the loop, with
        no concurrent future and no chaining of one future to the other in between. The
        call runs to its end even when the awaiting task is cancelled."""
        waiter = _LoopWaiter(loop)
        self._put(waiter, func, args)
        return waiter.future

    def _put(
        self,
        future: concurrent.futures.Future[Any] | _LoopWaiter,
        func: Callable[..., Any],
        args: tuple[Any, ...],
    ) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the {self.name} pool is shut down")
            self._queued += 1
            if self._idle < self._queued and len(self._threads) < self.max_threads:
                self._serial += 1
                thread = threading.Thread(
                    target=self._run, name=f"{self.name}-{self._serial}", daemon=True
                )
                self._threads.add(thread)
                self._idle += 1  # counted idle until it takes its first item
                thread.start()
            self._queue.put((future, func, args))

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            try:
                item = self._queue.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:
                    # a submit may have counted on this thread: leave only when none waits
                    if self._queued == 0 or self._closed:
                        self._idle -= 1
                        self._threads.discard(me)
                        return
                continue
            if item is None:  # shutdown
                with self._lock:
                    self._idle -= 1
                    self._threads.discard(me)
                return
            future, func, args = item
            with self._lock:
                self._queued -= 1
                self._idle -= 1
            outcome: tuple[bool, Any] | None = None
            if isinstance(future, _LoopWaiter) or future.set_running_or_notify_cancel():
                try:
                    outcome = (True, func(*args))
                except BaseException as exc:
                    outcome = (False, exc)
            # Idle again before the result is handed over: the caller's next submit (sent
            # as soon as it has this answer) then finds this thread instead of starting one.
            with self._lock:
                self._idle += 1
            if isinstance(future, _LoopWaiter):
                assert outcome is not None
                future.deliver(*outcome)
            elif outcome is not None:
                if outcome[0]:
                    future.set_result(outcome[1])
                else:
                    future.set_exception(outcome[1])
            del future, func, args, item, outcome

    def shutdown(self, wait: bool = True) -> None:
        """Run what is queued, then stop every thread (waiting for them when `wait`)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()
