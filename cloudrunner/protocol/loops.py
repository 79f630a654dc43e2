"""Follow-up loop budgets (spec sections 1 and 6): how many automatic follow-ups each
stop/subagentStop script may still cause in one conversation.

The merge asks the store once per candidate follow-up, in priority order; `try_consume` must
check and count in one step, so a persistent store shared by several workers stays correct.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class LoopBudget:
    allowed: bool
    #: follow-ups counted for this script in this conversation, including this one if allowed
    used: int
    #: None = unlimited
    limit: int | None


class LoopCounterStore(Protocol):
    def try_consume(self, conversation_id: str, script: str, limit: int | None) -> LoopBudget:
        """Count one follow-up for `script` if it is still under `limit` (None: no limit)."""
        ...

    def used(self, conversation_id: str, script: str) -> int:
        """How many follow-ups `script` has caused in the conversation so far."""
        ...


class InMemoryLoopCounterStore:
    """A store for one process (tests, one-shot runs); the worker adds a persistent one."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def try_consume(self, conversation_id: str, script: str, limit: int | None) -> LoopBudget:
        key = (conversation_id, script)
        with self._lock:
            used = self._counts.get(key, 0)
            if limit is not None and used >= limit:
                return LoopBudget(False, used, limit)
            self._counts[key] = used + 1
            return LoopBudget(True, used + 1, limit)

    def used(self, conversation_id: str, script: str) -> int:
        with self._lock:
            return self._counts.get((conversation_id, script), 0)
