"""`with obj:` for the objects that own something to release (containers, files)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class ClosesOnExit(ABC):
    """Base: `__enter__` returns the object, `__exit__` calls its `close()`."""

    @abstractmethod
    def close(self) -> None:
        """Release what the object owns; idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
