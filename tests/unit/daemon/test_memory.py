"""Handing memory back after a crowd of connections."""

from __future__ import annotations

from cloudrunner.daemon.memory import TRIM_AFTER_DROP, Trimmer, trim


def test_trims_after_a_large_drop_and_follows_up_then_stops() -> None:
    open_now = [0]
    trimmer = Trimmer(lambda: (open_now[0], open_now[0]))
    for count in (10, 500, TRIM_AFTER_DROP + 5):
        open_now[0] = count
        trimmer.tick()
    assert trimmer.trims == 0, "no trim while connections rise"
    open_now[0] = 4
    trimmer.tick()
    assert trimmer.trims == 1
    for _ in range(10):
        trimmer.tick()
    assert trimmer.trims == 1 + Trimmer.FOLLOW_UPS, "a few follow-ups, then quiet"
    open_now[0] = 400  # a small rise and fall is no reason to trim
    trimmer.tick()
    open_now[0] = 0
    trimmer.tick()
    assert trimmer.trims == 1 + Trimmer.FOLLOW_UPS


def test_trim_runs_here() -> None:
    assert trim() is True, "this is a glibc system: malloc_trim is there"


def test_a_crowd_that_came_and_went_between_two_ticks_is_seen() -> None:
    counts = iter([(0, 0), (0, 10_000), (0, 0)])
    trimmer = Trimmer(lambda: next(counts))
    trimmer.tick()
    trimmer.tick()
    assert trimmer.trims == 1
