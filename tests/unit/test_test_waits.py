"""Waiting in the tests and the bench: `tests/support/waiting.py` (on `bench/waiting.py`) polls
with a deadline, and no other code there sleeps to wait for something to happen (issue 36);
the few sleeps that pace or time something on purpose are listed here with their reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("tests", "bench")
#: (file, the function holding the sleep) -> why it is not a wait for an event
DELIBERATE = {
    ("bench/waiting.py", "sample_until"): "the pause between two polls, the tests' as well",
    ("bench/fixtures.py", "settle"):
        "age: hooks files written must get older than the racy window, a span of time",
    ("tests/unit/daemon/test_threads.py", "test_a_submit_racing_an_idle_exit_is_never_lost"):
        "timing: submissions land on both sides of the pool's idle timeout",
    ("tests/unit/daemon/test_connections.py",
     "test_silent_and_slow_header_clients_are_disconnected"):
        "pacing: a slow client trickles its header one byte at a time",
    ("tests/unit/audit/test_export_tail.py", "write"):
        "pacing: records are appended over time while `tail -f` follows the log",
    ("tests/unit/workspace/test_head.py", "_age"):
        "mtime granularity: the kernel's coarse clock must tick between two changes",
    ("tests/e2e/test_serve_faults.py", "trickle"):
        "pacing: slow clients send one byte at a time",
}  # fmt: skip


def _sleeps(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function) of each call of `time.sleep`, however it was imported, and
    of each wait on an Event made for it."""
    tree = ast.parse(source)
    modules = {"time"}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "time"}
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            names |= {a.asname or a.name for a in node.names if a.name == "sleep"}
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inner = getattr(child, "name", function)
            else:
                inner = function
            if isinstance(child, ast.Call):
                called = child.func
                time_sleep = (
                    isinstance(called, ast.Attribute)
                    and called.attr == "sleep"
                    and isinstance(called.value, ast.Name)
                    and called.value.id in modules
                )
                bare_sleep = isinstance(called, ast.Name) and called.id in names
                if time_sleep or bare_sleep or _waits_on_a_new_event(called):
                    found.append((child.lineno, function))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def _waits_on_a_new_event(called: ast.expr) -> bool:
    """`threading.Event().wait(...)`: a sleep by another name (nothing can set that Event)."""
    if not (isinstance(called, ast.Attribute) and called.attr == "wait"):
        return False
    made = called.value
    if not isinstance(made, ast.Call):
        return False
    maker = made.func
    name = maker.attr if isinstance(maker, ast.Attribute) else getattr(maker, "id", "")
    return name == "Event"


def _scanned_sleeps() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for root in SCANNED:
        for path in sorted((REPO / root).rglob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            for line, function in _sleeps(path.read_text()):
                found.setdefault((relative, function), []).append(line)
    return found


def test_no_test_sleeps_to_wait_outside_the_waiting_helper() -> None:
    found = _scanned_sleeps()
    unexplained = {
        f"{path}:{line} (in {function})"
        for (path, function), lines in found.items()
        if (path, function) not in DELIBERATE
        for line in lines
    }
    assert not unexplained, (
        "poll with tests.support.waiting (or wait on a real event) instead of sleeping; a "
        f"sleep that is not a wait goes in DELIBERATE with its reason: {sorted(unexplained)}"
    )


def test_every_deliberate_sleep_is_still_there() -> None:
    stale = set(DELIBERATE) - set(_scanned_sleeps())
    assert not stale, f"listed as deliberate but gone: drop them from DELIBERATE: {stale}"


def test_the_scan_sees_each_way_of_calling_sleep_and_nothing_else() -> None:
    source = """
import time
import time as clock
from time import sleep, sleep as nap
import asyncio

def a():
    time.sleep(1)

def b():
    def inner():
        clock.sleep(1)
    sleep(1)

c = lambda: nap(1)
script = "time.sleep(1)"
async def d():
    await asyncio.sleep(0)

def e(ready):
    threading.Event().wait(0.1)
    ready.wait(0.1)
"""
    assert _sleeps(source) == [(8, "a"), (12, "inner"), (13, "b"), (15, "<module>"), (21, "e")]


def test_wait_for_answers_the_first_true_value() -> None:
    answers = iter([None, 0, "", "found", "later"])
    assert wait_for(lambda: next(answers), "an answer", interval_s=0) == "found"
    assert next(answers) == "later"


def test_wait_for_names_what_never_came_and_adds_the_explanation() -> None:
    with pytest.raises(AssertionError, match=r"the thing did not come true within 0\.05 s:\nlog"):
        wait_for(lambda: False, "the thing", timeout_s=0.05, interval_s=0.01, explain=lambda: "log")
    with pytest.raises(AssertionError, match=r"the thing did not come true within 0\.05 s$"):
        wait_for(lambda: None, "the thing", timeout_s=0.05, interval_s=0.01)


def test_an_exception_of_the_condition_ends_the_wait() -> None:
    calls = []

    def died() -> bool:
        calls.append(1)
        raise RuntimeError("the process died")

    with pytest.raises(RuntimeError, match="died"):
        wait_for(died, timeout_s=60)
    assert len(calls) == 1
