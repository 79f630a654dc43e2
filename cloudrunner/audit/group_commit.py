"""Group commit: one fdatasync makes the records of every concurrent event durable.

Each batch a writer appends gets a generation number (1, 2, 3, ...) while the writer's lock
is held. A caller that needs its batch on disk calls `wait(generation)` after releasing that
lock: if no sync is running, it becomes the syncer and syncs everything written so far (the
`sync` callable snapshots the newest generation under the writer's lock, then syncs outside
it); if one is running, it waits for it and, when that sync did not reach its generation,
one of the waiters syncs next. So while one fdatasync runs, the batches appended meanwhile
queue up and the next fdatasync covers them all: at most one sync in flight, and none is
skipped. A failed sync fails every batch it was meant to cover (a retry on Linux may report
success although the data was lost, so it is not trusted).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class SyncFailed(Exception):
    """A sync of everything up to `generation` failed with `error`."""

    def __init__(self, generation: int, error: Exception) -> None:
        super().__init__(str(error))
        self.generation = generation
        self.error = error


class GroupCommit:
    """Generations written and made durable, and who syncs next."""

    def __init__(self, sync: Callable[[], int]) -> None:
        #: syncs what was written; returns the generation it covered, raises SyncFailed
        self._sync = sync
        self._cond = threading.Condition(threading.Lock())
        self._durable = 0
        self._syncing = False
        self._failure: SyncFailed | None = None
        #: how many fdatasync calls this coordinator made (for tests and the bench)
        self.syncs = 0

    @property
    def durable(self) -> int:
        return self._durable

    def covered(self, generation: int) -> None:
        """A sync made elsewhere (under the writer's lock) covered `generation`."""
        with self._cond:
            if generation > self._durable:
                self._durable = generation
                self._cond.notify_all()

    def wait(self, generation: int) -> None:
        """Return once `generation` is durable; raise the error of the sync that failed it."""
        cond = self._cond
        with cond:
            while True:
                if self._durable >= generation:
                    return
                failure = self._failure
                if failure is not None and failure.generation >= generation:
                    raise failure.error
                if not self._syncing:
                    self._syncing = True
                    break
                cond.wait()
        covered = 0
        try:
            covered = self._sync()
        except SyncFailed as exc:
            with cond:
                self._syncing = False
                if self._failure is None or exc.generation > self._failure.generation:
                    self._failure = exc
                cond.notify_all()
            raise exc.error from None
        except BaseException:
            with cond:
                self._syncing = False
                cond.notify_all()
            raise
        with cond:
            self._syncing = False
            self.syncs += 1
            if covered > self._durable:
                self._durable = covered
            cond.notify_all()
        if covered < generation:  # cannot happen: the sync covers all that was written
            raise RuntimeError(f"audit sync covered generation {covered}, not {generation}")


class Durability:
    """One generation written, not yet known to be on disk: `wait()` returns once it is
    there (syncing it, or sharing a sync under way, as `GroupCommit.wait`), or raises the
    error of the sync that failed it."""

    __slots__ = ("_generation", "_group")

    def __init__(self, group: GroupCommit | None, generation: int) -> None:
        self._group = group
        self._generation = generation

    @property
    def done(self) -> bool:
        return self._group is None or self._group.durable >= self._generation

    def wait(self) -> None:
        if self._group is not None:
            self._group.wait(self._generation)


#: nothing to wait for (fsync "never")
DURABLE_NOW = Durability(None, 0)
