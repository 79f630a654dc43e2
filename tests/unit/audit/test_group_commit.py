"""Group commit of the audit log's fdatasync (fsync "always") on real files and threads.

The fdatasync spy below calls the real one and records how many bytes of which file each
call covered (the size before the call: everything written before it). A batch's records
are durable on return when some sync of their file that started after they were written
covered their last byte; the tests check exactly that, for every batch of every thread.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.audit import AuditLogError, AuditWriter, verify_log
from cloudrunner.audit.group_commit import GroupCommit, SyncFailed
from tests.support.waiting import wait_for

THREADS = 8
#: the waits here had no deadline but the suite's (900 s): a generous one of their own
LONG_S = 600.0


class SyncSpy:
    """Wraps os.fdatasync: per inode, the largest size a completed sync covered."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.real = os.fdatasync
        self.lock = threading.Lock()
        self.covered: dict[int, int] = {}
        self.calls = 0
        #: runs before the real sync (may block or raise), with the call's number (1, 2, ...)
        self.before: Callable[[int], None] = lambda number: None
        monkeypatch.setattr(os, "fdatasync", self)

    def __call__(self, fd: int) -> None:
        st = os.fstat(fd)
        with self.lock:
            self.calls += 1
            number = self.calls
        self.before(number)
        self.real(fd)
        with self.lock:
            self.covered[st.st_ino] = max(self.covered.get(st.st_ino, 0), st.st_size)

    def covered_now(self, inode: int) -> int:
        with self.lock:
            return self.covered.get(inode, 0)


def line_ends(path: Path) -> dict[int, int]:
    """seq -> the byte offset just past its line."""
    import json

    ends: dict[int, int] = {}
    offset = 0
    for line in path.read_bytes().splitlines(keepends=True):
        offset += len(line)
        ends[json.loads(line)["seq"]] = offset
    return ends


def wait_for_lines(path: Path, count: int) -> None:
    """Until the file holds `count` lines."""
    wait_for(
        lambda: path.exists() and path.read_bytes().count(b"\n") >= count,
        f"{count} lines in the log", timeout_s=LONG_S, interval_s=0.001,
    )  # fmt: skip


def wait_for_arrivals(writer: AuditWriter, count: int) -> None:
    """Until `count` appends are under way (waiting for the lock or their sync)."""
    wait_for(
        lambda: writer._arrivals >= count, f"{count} appends under way", timeout_s=LONG_S,
        interval_s=0.001,
    )  # fmt: skip


def test_concurrent_batches_are_durable_on_return_and_keep_one_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.log"
    spy = SyncSpy(monkeypatch)
    returned: list[tuple[list[dict[str, Any]], int]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    per_thread = 40
    with AuditWriter(log, worker="w", fsync="always", max_bytes=None) as writer:
        start = threading.Barrier(THREADS)

        def appender(index: int) -> None:
            start.wait()
            try:
                for i in range(per_thread):
                    batch = writer.append_many(
                        [("hook", {"thread": index, "i": i}), ("decision", {"thread": index})]
                    )
                    # What a sync has covered at the moment append_many returned.
                    seen = spy.covered_now(os.stat(log).st_ino)
                    with lock:
                        returned.append((batch, seen))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=appender, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        syncs = writer.syncs
    assert errors == []
    report = verify_log(log)
    assert report.ok and report.records == THREADS * per_thread * 2
    ends = line_ends(log)
    for batch, seen in returned:
        # The batch's two records are adjacent in the chain and on disk when it returned.
        assert batch[1]["seq"] == batch[0]["seq"] + 1
        assert batch[1]["prev_hash"] == batch[0]["hash"]
        assert ends[batch[1]["seq"]] <= seen
    assert 1 <= syncs <= THREADS * per_thread
    assert spy.calls >= syncs


def test_one_sync_covers_every_batch_appended_while_the_previous_one_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thread 0 appends alone and syncs under the lock; the 7 others arrive meanwhile. The
    first of them to write shares its sync; that sync runs until all have written, so at
    most one more sync covers the rest: 2 or 3 syncs for 8 batches, never 8."""
    log = tmp_path / "audit.log"
    spy = SyncSpy(monkeypatch)
    release = threading.Event()
    writer = AuditWriter(log, worker="w", fsync="always", max_bytes=None)

    def hold(number: int) -> None:
        if number == 1:  # alone, under the lock: until every other append has arrived
            wait_for_arrivals(writer, THREADS)
        elif number == 2:  # the first shared sync: until every batch is written
            wait_for_lines(log, THREADS)
            release.set()

    spy.before = hold
    with writer:
        first = threading.Thread(target=writer.append, args=("hook", {"thread": 0}))
        first.start()
        # the first thread is now inside its sync
        wait_for(lambda: spy.calls > 0, "the first sync", timeout_s=LONG_S, interval_s=0.001)
        others = [
            threading.Thread(target=writer.append, args=("hook", {"thread": n}))
            for n in range(1, THREADS)
        ]
        for thread in others:
            thread.start()
        for thread in [first, *others]:
            thread.join()
        assert release.is_set()
        assert 2 <= writer.syncs <= 3
        assert spy.calls == writer.syncs
    assert verify_log(log).records == THREADS


def test_a_failed_sync_fails_every_batch_it_covered_and_no_one_hangs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.log"
    spy = SyncSpy(monkeypatch)

    writer = AuditWriter(log, worker="w", fsync="always", max_bytes=None)

    def fail_the_first_two(number: int) -> None:
        if number == 1:  # thread 0's, alone under the lock: once all have arrived
            wait_for_arrivals(writer, THREADS)
        elif number == 2:  # the first shared one: once every batch is written
            wait_for_lines(log, THREADS)
        if number <= 2:
            raise OSError(errno.EIO, "Input/output error")

    spy.before = fail_the_first_two
    outcomes: dict[int, str] = {}
    with writer:

        def appender(index: int) -> None:
            try:
                writer.append("hook", {"thread": index})
                outcomes[index] = "ok"
            except AuditLogError as exc:
                outcomes[index] = exc.message

        first = threading.Thread(target=appender, args=(0,))
        first.start()
        wait_for(lambda: spy.calls > 0, "the first sync", timeout_s=LONG_S, interval_s=0.001)
        others = [threading.Thread(target=appender, args=(n,)) for n in range(1, THREADS)]
        for thread in others:
            thread.start()
        for thread in [first, *others]:
            thread.join()
        # A later append is synced by a sync of its own, which works again.
        writer.append("hook", {"thread": "after"})
    # Thread 0's own sync failed it; the shared sync failed every batch it was to cover
    # (at least its syncer's); any batch written after its snapshot got a sync that worked.
    assert len(outcomes) == THREADS
    failed = {n for n, message in outcomes.items() if message != "ok"}
    assert 0 in failed and len(failed) >= 2
    for n in failed:
        assert "cannot sync audit log" in outcomes[n] and "Input/output error" in outcomes[n]
    assert verify_log(log).records == THREADS + 1  # written, only their sync failed


def test_a_rotation_while_batches_wait_keeps_them_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.log"
    SyncSpy(monkeypatch)
    with AuditWriter(log, worker="w", fsync="always", max_bytes=2_000) as writer:

        def appender(index: int) -> None:
            for i in range(30):
                writer.append_many([("hook", {"thread": index, "i": i, "pad": "x" * 100})])

        threads = [threading.Thread(target=appender, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    report = verify_log(log)
    assert report.ok and report.records == THREADS * 30
    assert len(list(tmp_path.glob("audit.log.*"))) > 3


@pytest.mark.parametrize("policy", ["interval", "never"])
def test_other_policies_do_not_wait_for_a_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    spy = SyncSpy(monkeypatch)
    with AuditWriter(tmp_path / "audit.log", fsync=policy, fsync_interval=3600) as writer:
        for i in range(5):
            writer.append("hook", {"i": i})
        assert writer.syncs == 0
    assert spy.calls == (1 if policy == "interval" else 0)  # interval: the close syncs


def test_interval_policy_syncs_an_append_once_the_interval_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = SyncSpy(monkeypatch)
    with AuditWriter(tmp_path / "audit.log", fsync="interval", fsync_interval=0.0) as writer:
        writer.append("hook", {"i": 1})
        assert spy.calls == 1
        writer.append_many([("hook", {"i": 2}), ("hook", {"i": 3})])
        assert spy.calls == 2


# -- the coordinator alone ---------------------------------------------------------------


def test_group_commit_waits_for_a_covering_sync_and_reports_its_failure() -> None:
    written = [0]
    results: list[int | SyncFailed] = []

    def sync() -> int:
        outcome = results.pop(0)
        if isinstance(outcome, SyncFailed):
            raise outcome
        return outcome

    group = GroupCommit(sync)
    written[0] = 2
    results.append(2)
    group.wait(1)  # syncs: covers 1 and 2
    assert group.durable == 2 and group.syncs == 1
    group.wait(2)  # already durable: no sync
    assert group.syncs == 1
    group.covered(5)  # a sync under the writer's lock
    group.wait(4)
    assert group.syncs == 1
    results.append(SyncFailed(7, AuditLogError("cannot sync audit log x: EIO")))
    with pytest.raises(AuditLogError, match="EIO"):
        group.wait(6)
    with pytest.raises(AuditLogError, match="EIO"):
        group.wait(7)  # covered by the failed sync: fails without trying again
    results.append(8)
    group.wait(8)
    assert group.durable == 8


def test_group_commit_refuses_a_sync_that_did_not_reach_the_generation() -> None:
    group = GroupCommit(lambda: 1)
    with pytest.raises(RuntimeError, match="covered generation 1, not 3"):
        group.wait(3)
