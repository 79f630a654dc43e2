"""AuditWriter on real files: chaining, torn tails, rotation, locking, errors."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.audit import (
    GENESIS_HASH,
    AuditLogError,
    AuditWriter,
    RecordKind,
    TornAcknowledgement,
    record_hash,
    verify_log,
)
from cloudrunner.audit.digest import digest_text
from cloudrunner.audit.rotation import rotated_path


def read_records(path: Path) -> list[dict[str, Any]]:
    """The parseable records of one file (torn lines left out)."""
    records = []
    for line in path.read_bytes().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def write_some(path: Path, count: int, **options: Any) -> list[dict[str, Any]]:
    with AuditWriter(path, worker="w", fsync="never", **options) as writer:
        return [writer.append(RecordKind.HOOK, {"hook_index": i}) for i in range(count)]


def test_records_are_chained_from_the_genesis_hash(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    written = write_some(log, 3)
    assert [r["seq"] for r in written] == [0, 1, 2]
    assert written[0]["prev_hash"] == GENESIS_HASH
    assert written[1]["prev_hash"] == written[0]["hash"]
    assert read_records(log) == written
    assert all(r["hash"] == record_hash(r) for r in written)


def test_append_returns_the_record_as_written(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    with AuditWriter(log, worker="w-1") as writer:
        record = writer.append(
            "hook",
            {
                "event": "beforeSubmitPrompt",
                "command": "guard --token abc",
                "payload": {"prompt": "hi"},
                "stdout_excerpt": writer.excerpt(b"x" * 5000),
            },
        )
    assert record["kind"] == "hook" and record["worker"] == "w-1"
    assert record["event"] == "beforeSubmitPrompt"
    assert record["command"] == "guard --token [REDACTED]"
    assert record["payload"]["prompt"] == digest_text("hi")
    assert len(record["stdout_excerpt"]) < 2100
    assert read_records(log) == [record]


def test_a_second_writer_continues_the_chain(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    first = write_some(log, 2)
    second = write_some(log, 1)
    assert second[0]["seq"] == 2 and second[0]["prev_hash"] == first[-1]["hash"]


def test_interleaved_writers_in_one_process_keep_one_chain(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    with AuditWriter(log, fsync="never") as a, AuditWriter(log, fsync="never") as b:
        for i in range(10):
            (a if i % 3 else b).append("hook", {"i": i})
    assert [r["seq"] for r in read_records(log)] == list(range(10))
    assert verify_log(log).ok


def test_threads_sharing_one_writer_keep_one_chain(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    with AuditWriter(log, fsync="never") as writer:

        def work(n: int) -> None:
            for i in range(50):
                writer.append("hook", {"thread": n, "i": i})

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    report = verify_log(log)
    assert report.ok and report.records == 400


@pytest.mark.parametrize("key", ["seq", "prev_hash", "hash", "kind"])
def test_fields_may_not_set_what_the_writer_owns(tmp_path: Path, key: str) -> None:
    with AuditWriter(tmp_path / "audit.log") as writer, pytest.raises(ValueError, match=key):
        writer.append("hook", {key: 1})
    assert not (tmp_path / "audit.log").exists() or not read_records(tmp_path / "audit.log")


def test_an_unknown_fsync_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sometimes"):
        AuditWriter(tmp_path / "audit.log", fsync="sometimes")


def _count_syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every fdatasync from now on, as the size of the file it synced."""
    synced_sizes: list[int] = []
    real = os.fdatasync

    def counting(fd: int) -> None:
        synced_sizes.append(os.fstat(fd).st_size)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counting)
    return synced_sizes


def test_fsync_always_syncs_an_events_records_once_after_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.log"
    synced_sizes = _count_syncs(monkeypatch)
    with AuditWriter(log, fsync="always") as writer:
        writer.append_many([("hook", {"i": i}) for i in range(5)])
        assert synced_sizes == [log.stat().st_size]  # one sync, with all five written
        writer.append("decision", {"i": 5})
        assert len(synced_sizes) == 2
    assert verify_log(log).records == 6


@pytest.mark.parametrize(("policy", "syncs"), [("always", 2), ("interval", 1), ("never", 0)])
def test_a_durable_append_is_on_disk_under_every_policy_but_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str, syncs: int
) -> None:
    """An event's first record (durable=True) is synced before any hook runs, also when the
    operator chose fsync "interval"; "never" means never."""
    log = tmp_path / "audit.log"
    synced_sizes = _count_syncs(monkeypatch)
    with AuditWriter(log, fsync=policy, fsync_interval=3600.0) as writer:
        writer.append("received", {"i": 0}, durable=True)
        size = log.stat().st_size
        writer.append("decision", {"i": 1})
        assert len(synced_sizes) == syncs
        if syncs:
            assert synced_sizes[0] == size  # the durable record, before the next was written


@pytest.mark.parametrize(("policy", "syncs"), [("always", 1), ("interval", 0), ("never", 0)])
def test_a_deferred_append_is_synced_by_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str, syncs: int
) -> None:
    """The first record of an event that runs no hook makes no sync of its own: the event's
    last records, synced as the policy says, carry it to disk with them."""
    log = tmp_path / "audit.log"
    synced_sizes = _count_syncs(monkeypatch)
    with AuditWriter(log, fsync=policy, fsync_interval=3600.0) as writer:
        writer.append("received", {"i": 0}, deferred=True)
        assert synced_sizes == []
        writer.append("decision", {"i": 1})
        assert synced_sizes == [log.stat().st_size] * syncs  # both records, one sync
        with pytest.raises(ValueError, match="durable on its own or deferred"):
            writer.append("received", {"i": 2}, durable=True, deferred=True)
    assert verify_log(log).records == 2


def test_a_deferred_record_is_synced_before_a_rotation_leaves_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.log"
    synced_sizes = _count_syncs(monkeypatch)
    with AuditWriter(log, fsync="always", max_bytes=400) as writer:
        writer.append("received", {"pad": "x" * 200}, deferred=True)
        size = log.stat().st_size
        writer.append("decision", {"pad": "y" * 200})  # over 400 bytes: rotates first
        assert rotated_path(log, 1).stat().st_size == size
        assert synced_sizes[0] == size  # the rotated file, synced before it was left
    assert verify_log(log).records == 2


def test_concurrent_durable_appends_share_their_syncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Durable appends from many threads under fsync "interval" are all on disk when they
    return, with no more syncs than appends (group commit)."""
    log = tmp_path / "audit.log"
    calls: list[int] = []
    real = os.fdatasync

    def slow(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow)
    with AuditWriter(log, fsync="interval", fsync_interval=3600.0) as writer:
        threads = [
            threading.Thread(target=lambda i=i: writer.append("received", {"i": i}, durable=True))
            for i in range(16)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert 1 <= len(calls) <= 16
        assert writer._group.durable == writer._generation  # everything written is synced
    assert verify_log(log).records == 16


@pytest.mark.parametrize("policy", ["always", "interval", "never"])
def test_every_fsync_policy_writes_a_verifiable_log(tmp_path: Path, policy: str) -> None:
    log = tmp_path / "audit.log"
    with AuditWriter(log, fsync=policy, fsync_interval=0.0) as writer:
        for i in range(5):
            writer.append("hook", {"i": i})
        writer.sync()
    assert verify_log(log).records == 5


def test_the_log_and_its_directory_are_created_private(tmp_path: Path) -> None:
    log = tmp_path / "state" / "audit" / "audit.log"
    write_some(log, 1)
    assert log.stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "state" / "audit" / "audit.log.lock").exists()


def test_a_path_that_cannot_be_created_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with (
        AuditWriter(blocker / "audit.log") as writer,
        pytest.raises(AuditLogError, match=r"file/audit\.log.*--audit-log"),
    ):
        writer.append("hook", {})


def test_each_failed_operation_is_counted(tmp_path: Path) -> None:
    # the daemon exports the count (cloudrunner_audit_write_failures_total)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with AuditWriter(blocker / "audit.log") as writer:
        assert writer.failures == 0
        for expected in (1, 2):
            with pytest.raises(AuditLogError):
                writer.append("hook", {})
            assert writer.failures == expected
    with AuditWriter(tmp_path / "audit.log") as fine:
        fine.append("hook", {})
        assert fine.failures == 0


# -- torn tails --------------------------------------------------------------------------------


def test_a_torn_tail_is_terminated_and_acknowledged(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    written = write_some(log, 2)
    torn = b'{"command":"echo hi","ev'
    offset = log.stat().st_size
    with log.open("ab") as handle:
        handle.write(torn)
    seen: list[TornAcknowledgement] = []
    with AuditWriter(log, on_torn=seen.append) as writer:
        after = writer.append("hook", {"n": 1})
    lines = log.read_bytes().split(b"\n")
    assert lines[2] == torn  # kept, byte for byte, now terminated
    ack = json.loads(lines[3])
    assert ack["kind"] == "torn_record"
    assert ack["torn"] == [
        {"offset": offset, "length": len(torn), "sha256": hashlib.sha256(torn).hexdigest()}
    ]
    assert ack["seq"] == 2 and ack["prev_hash"] == written[-1]["hash"]
    assert after["seq"] == 3 and after["prev_hash"] == ack["hash"]
    assert [a.seq for a in seen] == [2] and writer.acknowledged == seen
    assert f"offset {offset}" in seen[0].message()
    report = verify_log(log)
    assert report.ok
    assert [t.acknowledged_by for t in report.torn] == [2]


def test_a_whole_record_lacking_only_its_newline_is_adopted(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    written = write_some(log, 2)
    log.write_bytes(log.read_bytes()[:-1])
    after = write_some(log, 1)
    assert after[0]["seq"] == 2 and after[0]["prev_hash"] == written[-1]["hash"]
    assert [r["kind"] for r in read_records(log)] == ["hook", "hook", "hook"]
    assert verify_log(log).ok


def test_a_torn_first_record_chains_from_genesis(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_bytes(b'{"comm')
    written = write_some(log, 1)
    ack = read_records(log)[0]
    assert ack["kind"] == "torn_record" and ack["seq"] == 0 and ack["prev_hash"] == GENESIS_HASH
    assert written[0]["seq"] == 1
    assert verify_log(log).ok


def test_a_writer_killed_while_acknowledging_leaves_both_lines_acknowledged(
    tmp_path: Path,
) -> None:
    # The first torn line got its newline, the acknowledgement after it was itself cut.
    log = tmp_path / "audit.log"
    write_some(log, 1)
    first_offset = log.stat().st_size
    with log.open("ab") as handle:
        handle.write(b'{"a":1,"b\n{"hash":"0')
    write_some(log, 1)
    ack = [r for r in read_records(log) if r["kind"] == "torn_record"]
    assert len(ack) == 1
    assert [span["offset"] for span in ack[0]["torn"]] == [first_offset, first_offset + 10]
    assert verify_log(log).ok


def test_a_file_that_is_not_an_audit_log_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "notes.txt"
    log.write_text("shopping list\nmilk\n")
    with AuditWriter(log) as writer, pytest.raises(AuditLogError, match="not a cloudrunner audit"):
        writer.append("hook", {})
    assert log.read_text() == "shopping list\nmilk\n"


def test_more_unreadable_lines_than_a_crash_leaves_are_refused(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_some(log, 1)
    with log.open("ab") as handle:
        handle.write(b'{"x\n' * 12)
    with AuditWriter(log) as writer, pytest.raises(AuditLogError, match="unreadable lines"):
        writer.append("hook", {})


# -- rotation ----------------------------------------------------------------------------------


def test_rotation_keeps_one_chain_across_files(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    written = write_some(log, 30, max_bytes=1500)
    rotated = sorted(p.name for p in tmp_path.glob("audit.log.*") if p.suffix != ".lock")
    assert len(rotated) >= 2
    assert all(p.stat().st_size <= 1500 for p in tmp_path.glob("audit.log*"))
    report = verify_log(log)
    assert report.ok and report.records == 30
    assert report.last_hash == written[-1]["hash"]
    oldest = read_records(tmp_path / f"audit.log.{len(rotated)}")
    assert oldest[0]["seq"] == 0


def test_a_writer_holding_the_old_file_follows_a_rotation(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    with (
        AuditWriter(log, fsync="never", max_bytes=None) as stale,
        AuditWriter(log, fsync="never", max_bytes=600) as rotating,
    ):
        stale.append("hook", {"who": "stale"})
        for _ in range(5):
            rotating.append("hook", {"who": "rotating"})
        last = stale.append("hook", {"who": "stale"})
    assert last["seq"] == 6
    assert read_records(log)[-1] == last
    assert verify_log(log).ok


def test_an_empty_live_file_continues_from_the_newest_rotated_file(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    written = write_some(log, 3)
    log.rename(tmp_path / "audit.log.1")
    log.touch()  # a rotation interrupted right after it made the new file
    after = write_some(log, 1)
    assert after[0]["seq"] == 3 and after[0]["prev_hash"] == written[-1]["hash"]
    assert verify_log(log).ok
