"""The per-listener connection bounds as a state machine, under random traffic."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cloudrunner.daemon.connections import ConnectionBook, Limits


class _Conn:
    """Stands in for a protocol object: closing it is what the event loop would report."""

    def __init__(self, book: ConnectionBook) -> None:
        self.book = book
        self.open = True

    def close(self, reason: str) -> None:
        self.open = False
        self.book.forget(self)  # type: ignore[arg-type]


def _limits(max_connections: int, max_unauthenticated: int) -> Limits:
    return Limits(1.0, 1.0, 65536, 100, max_connections, max_unauthenticated)


_OPS = st.lists(
    st.tuples(st.sampled_from(["connect", "auth", "start", "finish", "drop"]), st.integers(0, 50)),
    max_size=200,
)


@settings(max_examples=200, deadline=None)
@given(ops=_OPS, cap=st.integers(1, 8), unauth_cap=st.integers(1, 8), tcp=st.booleans())
def test_bounds_hold_and_no_busy_connection_is_ever_evicted(
    ops: list[tuple[str, int]], cap: int, unauth_cap: int, tcp: bool
) -> None:
    book = ConnectionBook(_limits(cap, unauth_cap), "t" * 20 if tcp else None)
    conns: list[Any] = []
    for op, index in ops:
        busy_before = set(book.busy)
        live = [c for c in conns if c.open]
        target = live[index % len(live)] if live else None
        if op == "connect":
            conn = _Conn(book)
            conns.append(conn)
            if not book.admit(conn):  # type: ignore[arg-type]
                conn.close("refused")
        elif target is None:
            continue
        elif op == "auth" and not book.authenticated(target):
            target.close("refused")
        elif op == "start" and target not in book.unauthenticated:
            book.started(target)
        elif op == "finish":
            book.finished(target)
        elif op == "drop":
            target.close("client gone")
        assert len(book.idle) + len(book.busy) <= cap
        assert len(book.unauthenticated) <= unauth_cap
        dropped = target if op == "drop" else None
        assert all(c.open for c in busy_before if c is not dropped), "a busy one was evicted"
        assert {c for c in conns if c.open} == (
            set(book.idle) | book.busy | set(book.unauthenticated)
        ), "the book and the open connections agree"


def test_unauthenticated_connections_never_take_an_authenticated_place() -> None:
    book = ConnectionBook(_limits(2, 3), "t" * 20)
    members = [_Conn(book) for _ in range(2)]
    for conn in members:
        assert book.admit(conn) and book.authenticated(conn)  # type: ignore[arg-type]
        book.started(conn)  # type: ignore[arg-type]
    strangers = [_Conn(book) for _ in range(100)]
    for conn in strangers:
        assert book.admit(conn)  # type: ignore[arg-type]
    assert all(c.open for c in members)
    assert sum(c.open for c in strangers) == 3 and all(c.open for c in strangers[-3:])
