"""The daemon's admission: events counted from their body to their end, refused once a
drain began, and a drain that waits for every counted event (real threads, no clock)."""

from __future__ import annotations

import threading

import pytest

from cloudrunner.daemon.admission import Admission
from cloudrunner.daemon.request_errors import DaemonError
from cloudrunner.refusals import ErrorCode
from tests.support.waiting import wait_for

#: the waits here had no deadline but the suite's (900 s): a generous one of their own
LONG_S = 600.0


def test_an_event_is_counted_waiting_then_in_flight_then_gone() -> None:
    admission = Admission(2)
    admission.queue()
    assert (admission.waiting, admission.in_flight) == (1, 0)
    with admission.slot(queued=True):
        assert (admission.waiting, admission.in_flight) == (0, 1)
    assert (admission.waiting, admission.in_flight) == (0, 0)


def test_a_drain_refuses_new_events_and_waits_for_one_still_queued() -> None:
    admission = Admission(1)
    admission.queue()  # its body read, not yet on its thread
    drained: list[bool] = []
    drainer = threading.Thread(target=lambda: drained.append(admission.drain(60)))
    drainer.start()
    wait_for(lambda: admission.draining, "the drain begun", timeout_s=LONG_S, interval_s=0.001)
    with pytest.raises(DaemonError) as refused:
        admission.queue()
    assert refused.value.code is ErrorCode.DRAINING
    with admission.slot(queued=True):  # the queued event still runs to its end
        assert drained == []
    drainer.join()
    assert drained == [True]


def test_a_drain_that_runs_out_of_time_says_so() -> None:
    admission = Admission(1)
    admission.queue()
    assert admission.drain(0.0) is False
    admission.unqueue()
    assert admission.drain(0.0) is True


def test_slots_bound_the_events_in_flight() -> None:
    admission = Admission(1)
    inside = threading.Event()
    leave = threading.Event()
    seen: list[int] = []

    def first() -> None:
        with admission.slot():
            inside.set()
            leave.wait()

    def second() -> None:
        with admission.slot():
            seen.append(admission.in_flight)

    one = threading.Thread(target=first)
    one.start()
    inside.wait()
    two = threading.Thread(target=second)
    two.start()
    wait_for(
        lambda: admission.waiting == 1, "the second waiting for the one slot", timeout_s=LONG_S,
        interval_s=0.001,
    )  # fmt: skip
    assert seen == []
    leave.set()
    one.join()
    two.join()
    assert seen == [1] and admission.in_flight == 0
