"""The session agent container's life cycle: every transition the table allows, every one it
refuses (late events change nothing), and the events the waiting threads watch."""

from __future__ import annotations

import threading

import pytest

from cloudrunner.sandbox.agent_lifecycle import NEXT, AgentLifecycle, Channel, Phase


def _at(phase: Phase) -> AgentLifecycle:
    life = AgentLifecycle()
    steps = {
        Phase.WAITING: [],
        Phase.READY: [life.hello],
        Phase.FAILED: [lambda: life.fail("broken")],
        Phase.ENDING: [life.channel_closed],
        Phase.GONE: [life.channel_closed, life.ended],
    }[phase]
    for step in steps:
        step()
    assert life.phase is phase
    return life


def test_a_new_container_waits_on_the_attach_stream() -> None:
    life = AgentLifecycle()
    assert (life.phase, life.channel, life.reason) == (Phase.WAITING, Channel.ATTACH, None)
    assert not life.settled.is_set() and not life.gone.is_set()


def test_the_usual_life_hello_then_failure_then_end() -> None:
    life = AgentLifecycle()
    assert life.adopt_socket() and life.channel is Channel.SOCKET
    assert life.hello() and life.phase is Phase.READY and life.settled.is_set()
    assert life.fail("wedged") == "wedged" and life.phase is Phase.FAILED
    assert life.channel_closed() and life.phase is Phase.ENDING
    assert life.fail("the container ended") == "wedged"  # the first reason is kept
    assert life.phase is Phase.ENDING
    assert life.ended() and life.phase is Phase.GONE and life.gone.is_set()


@pytest.mark.parametrize("start", list(Phase))
def test_hello_moves_only_a_waiting_container(start: Phase) -> None:
    life = _at(start)
    assert life.hello() == (start is Phase.WAITING)
    assert life.phase is (Phase.READY if start is Phase.WAITING else start)


@pytest.mark.parametrize("start", list(Phase))
def test_the_channel_closes_once(start: Phase) -> None:
    life = _at(start)
    first = life.channel_closed()
    assert first == (start in {Phase.WAITING, Phase.READY, Phase.FAILED})
    assert not life.channel_closed()  # the second reader to see the end does nothing


@pytest.mark.parametrize("start", list(Phase))
def test_only_an_ending_container_becomes_gone(start: Phase) -> None:
    life = _at(start)
    assert life.ended() == (start is Phase.ENDING)
    assert life.gone.is_set() == (start in {Phase.ENDING, Phase.GONE})


@pytest.mark.parametrize("start", list(Phase))
def test_a_failure_settles_and_keeps_a_reason(start: Phase) -> None:
    life = _at(start)
    life.fail("late")
    assert life.settled.is_set() and life.reason is not None
    assert life.phase is (Phase.FAILED if start in {Phase.WAITING, Phase.READY} else start)


@pytest.mark.parametrize("start", [p for p in Phase if p is not Phase.WAITING])
def test_a_socket_is_adopted_only_while_waiting(start: Phase) -> None:
    life = _at(start)
    assert not life.adopt_socket() and life.channel is Channel.ATTACH


def test_a_socket_is_adopted_once() -> None:
    life = AgentLifecycle()
    assert life.adopt_socket() and not life.adopt_socket()


def test_the_table_has_no_way_back_and_gone_is_final() -> None:
    order = list(Phase)
    for phase, allowed in NEXT.items():
        assert all(order.index(to) > order.index(phase) for to in allowed), phase
    assert NEXT[Phase.GONE] == frozenset()


def test_the_attach_stream_closing_says_which_channel_carried_requests() -> None:
    life = AgentLifecycle()
    assert life.attach_closed() is Channel.ATTACH and life.attach_done.is_set()
    other = AgentLifecycle()
    other.adopt_socket()
    assert other.attach_closed() is Channel.SOCKET


def test_racing_readers_read_the_end_once() -> None:
    life = AgentLifecycle()
    life.hello()
    wins: list[bool] = []
    start = threading.Barrier(8)

    def reader() -> None:
        start.wait()
        wins.append(life.channel_closed())

    threads = [threading.Thread(target=reader) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wins.count(True) == 1
