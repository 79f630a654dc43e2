"""The elastic thread pool: bounded, FIFO, and back to no threads when idle."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from cloudrunner.daemon.threads import ElasticPool
from tests.support.waiting import came_true


def _until(condition: Callable[[], object], timeout_s: float = 30.0) -> bool:
    return came_true(condition, timeout_s, interval_s=0.02)


def test_never_more_threads_than_the_bound_and_every_item_runs() -> None:
    pool = ElasticPool(4, idle_s=0.2, name="t")
    gate = threading.Event()
    running: list[int] = []
    peak = [0]
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            running.append(i)
            peak[0] = max(peak[0], len(running))
        gate.wait(10)
        with lock:
            running.remove(i)
        return i * 2

    futures = [pool.submit(work, i) for i in range(40)]
    assert _until(lambda: pool.threads == 4 and len(running) == 4)
    assert pool.queued == 36
    gate.set()
    assert [f.result(30) for f in futures] == [i * 2 for i in range(40)]
    assert peak[0] == 4
    assert _until(lambda: pool.threads == 0), "idle threads exit"
    pool.shutdown()


def test_exceptions_reach_the_future_and_the_thread_lives_on() -> None:
    pool = ElasticPool(1, idle_s=5, name="t")

    def boom() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        pool.submit(boom).result(10)
    assert pool.submit(lambda: 7).result(10) == 7
    pool.shutdown()
    assert pool.threads == 0
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: 1)


def test_a_submit_racing_an_idle_exit_is_never_lost() -> None:
    pool = ElasticPool(2, idle_s=0.01, name="t")
    for round_ in range(300):
        assert pool.submit(lambda r=round_: r).result(10) == round_
        # deliberate timing, not a wait: the pauses land on both sides of the idle timeout
        time.sleep(0.0005 * (round_ % 30))
    pool.shutdown()


def test_shutdown_runs_what_is_queued() -> None:
    pool = ElasticPool(1, idle_s=5, name="t")
    gate = threading.Event()
    first = pool.submit(gate.wait, 10)
    later = [pool.submit(lambda i=i: i) for i in range(5)]
    gate.set()
    pool.shutdown(wait=True)
    assert first.result(0) is True and [f.result(0) for f in later] == list(range(5))


def test_submit_to_loop_settles_an_asyncio_future_and_runs_even_when_cancelled() -> None:
    import asyncio
    import threading

    pool = ElasticPool(2, idle_s=0.2, name="t")
    ran = threading.Event()
    release = threading.Event()

    def slow() -> str:
        release.wait(5)
        ran.set()
        return "late"

    def boom() -> None:
        raise ValueError("from the thread")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        assert await pool.submit_to_loop(loop, lambda a, b: a + b, 2, 3) == 5
        try:
            await pool.submit_to_loop(loop, boom)
        except ValueError as exc:
            assert str(exc) == "from the thread"
        else:
            raise AssertionError("the thread's exception was not raised")
        waiting = asyncio.ensure_future(pool.submit_to_loop(loop, slow))
        await asyncio.sleep(0)
        waiting.cancel()
        release.set()
        await loop.run_in_executor(None, ran.wait, 5)
        await asyncio.sleep(0.05)  # its answer arrives on a cancelled future: ignored

    asyncio.run(main())
    assert ran.is_set()
    pool.shutdown()
