"""BoundedMemo: what the per-event path remembers stays bounded and safe to share."""

from __future__ import annotations

import threading

import pytest

from cloudrunner.memo import BoundedMemo


def test_the_oldest_entry_goes_when_the_memo_is_full() -> None:
    memo: BoundedMemo[int, str] = BoundedMemo(size=3)
    for key in range(3):
        memo.put(key, str(key))
    memo.put(1, "one again")  # an update takes no room
    assert len(memo) == 3 and memo.get(1) == "one again"
    memo.put(3, "3")
    assert 0 not in memo and memo.get(3) == "3" and len(memo) == 3


def test_threads_putting_at_once_never_overfill_it_or_fail() -> None:
    memo: BoundedMemo[tuple[int, int], int] = BoundedMemo(size=16)
    errors: list[BaseException] = []

    def fill(thread: int) -> None:
        try:
            for i in range(2000):
                memo.put((thread, i), i)
                memo.get((thread, i - 1))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=fill, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(memo) == 16


def test_a_memo_holds_at_least_one_entry() -> None:
    with pytest.raises(ValueError, match="at least one"):
        BoundedMemo(size=0)
