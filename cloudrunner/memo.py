"""A bounded memo that the threads of a daemon share: what the per-event path remembers
between events (hooks files by identity, HEAD by its files' identity, a warm sandbox's
cleaned attestation), so that none of them grows without end or breaks under concurrent
events. Reads take no lock (one dict lookup); a put takes one, evicting the oldest entry
when the memo is full."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """At most `size` entries; the oldest goes first."""

    def __init__(self, size: int = 256) -> None:
        if size < 1:
            raise ValueError("a memo holds at least one entry")
        self.size = size
        self._entries: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        with self._lock:
            if key not in self._entries and len(self._entries) >= self.size:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        """The keys held now (a snapshot: other threads may put meanwhile)."""
        with self._lock:
            return iter(list(self._entries))
