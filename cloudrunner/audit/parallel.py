"""Reading the files of one rotated set in several processes, results in file order.

Parsing JSON is most of what `audit query` and `audit stats` cost, and a rotated set is
many files of equal size, so each file is one task. A task returns its result and the
warnings it would have printed; the caller gets them file by file, oldest first, exactly
as a single process would have produced them. `jobs=1` runs in this process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Generator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")

#: a task: (file, is it the live file) -> (result, warnings)
Task = Callable[[Path, bool], tuple[T, list[str]]]


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def work_of(sets: list[list[Path]]) -> list[tuple[Path, bool]]:
    """(file, is_live) for every file of every set, in order."""
    return [(path, path is files[-1]) for files in sets for path in files]


def per_file(
    task: Task[T], work: list[tuple[Path, bool]], jobs: int
) -> Generator[tuple[T, list[str]], None, None]:
    if jobs <= 1 or len(work) <= 1:
        for path, is_live in work:
            yield task(path, is_live)
        return
    # Not multiprocessing.Pool: stopping early (a --limit reached) made its terminate()
    # wait for ever, now and then, on a task-feeding thread. An executor never terminates
    # a worker: the tasks not started are cancelled, the running ones (a file each) finish.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(min(jobs, len(work)), mp_context=context) as pool:
        futures = [pool.submit(_Star(task), item) for item in work]
        try:
            for future in futures:
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


class _Star(Generic[T]):
    """`task(*args)`, picklable when `task` is."""

    def __init__(self, task: Task[T]) -> None:
        self.task = task

    def __call__(self, args: tuple[Path, bool]) -> tuple[T, list[str]]:
        return self.task(*args)
