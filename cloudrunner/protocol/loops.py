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


def consume(used: int, limit: int | None) -> LoopBudget:
    """The budget decision for a script that has caused `used` follow-ups so far: allowed
    (and then counted: `used + 1`) while under `limit`. Stores call it under their lock."""
    if limit is not None and used >= limit:
        return LoopBudget(False, used, limit)
    return LoopBudget(True, used + 1, limit)


class InMemoryLoopCounterStore:
    """A store for one process (tests, one-shot runs); the worker adds a persistent one."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def try_consume(self, conversation_id: str, script: str, limit: int | None) -> LoopBudget:
        key = (conversation_id, script)
        with self._lock:
            budget = consume(self._counts.get(key, 0), limit)
            self._counts[key] = budget.used
            return budget

    def used(self, conversation_id: str, script: str) -> int:
        with self._lock:
            return self._counts.get((conversation_id, script), 0)
