"""Reading rotated, compressed and several audit logs, with torn lines."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from cloudrunner.audit import AuditLogError
from cloudrunner.audit.reader import as_record, expand, log_set, read_logs
from tests.unit.audit.logs import sample_records, write_log


def seqs(paths: list[Path], warnings: list[str] | None = None) -> list[int]:
    sink = warnings if warnings is not None else []
    return [entry.record["seq"] for entry in read_logs(paths, sink.append)]


def test_a_rotated_set_is_read_oldest_first_as_one_chain(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records() * 3, max_bytes=1500)
    assert len(log_set(log)) >= 3
    assert seqs([log]) == list(range(36))


def test_gzip_rotated_files_are_read_by_their_content(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records() * 3, max_bytes=1500)
    rotated = tmp_path / "audit.log.2"
    (tmp_path / "audit.log.2.gz").write_bytes(gzip.compress(rotated.read_bytes()))
    rotated.unlink()
    assert tmp_path / "audit.log.2.gz" in log_set(log)
    assert seqs([log]) == list(range(36))


def test_a_plain_and_a_compressed_copy_of_one_file_are_an_error(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records() * 3, max_bytes=1500)
    (tmp_path / "audit.log.1.gz").write_bytes(gzip.compress(b""))
    with pytest.raises(AuditLogError, match=r"both .*audit\.log\.1 and .*audit\.log\.1\.gz"):
        log_set(log)


def test_a_cut_gzip_file_is_an_error_naming_it(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records())
    packed = tmp_path / "old.log"
    packed.write_bytes(gzip.compress(log.read_bytes())[:-20])
    with pytest.raises(AuditLogError, match=r"old\.log: .*cut short or damaged"):
        seqs([packed])


def test_several_logs_are_merged_by_time_and_a_member_is_not_read_twice(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a" / "audit.log", tmp_path / "b" / "audit.log"
    write_log(a, sample_records()[:4])
    write_log(b, sample_records()[:2])
    times = [e.record["time"] for e in read_logs([a, b], print)]
    assert times == sorted(times) and len(times) == 6
    assert [len(s) for s in expand([a, a])] == [1]


def test_a_truncated_last_line_is_skipped_with_a_crash_warning(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records()[:3])
    with log.open("ab") as handle:
        handle.write(b'{"command":"ls","dec')
    warnings: list[str] = []
    assert seqs([log], warnings) == [0, 1, 2]
    (only,) = warnings
    assert only.startswith(f"{log}:4: the last record is truncated (20 bytes)")
    assert "crashed mid-write" in only


def test_an_acknowledged_torn_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records()[:2])
    with log.open("ab") as handle:
        handle.write(b'{"comm')
    write_log(log, sample_records()[:1])  # acknowledges it and goes on
    warnings: list[str] = []
    records = list(read_logs([log], warnings.append))
    assert [r.record["kind"] for r in records] == ["hook", "hook", "torn_record", "hook"]
    assert warnings == [f"{log}:3: 6 bytes that are not an audit record (a torn write); skipped"]


def test_a_file_that_is_not_an_audit_log_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    with pytest.raises(AuditLogError, match=r"notes\.txt is not a cloudrunner audit log"):
        seqs([other])
    with pytest.raises(AuditLogError, match="does not exist"):
        seqs([tmp_path / "missing.log"])


def test_as_record_wants_the_chain_keys() -> None:
    assert as_record(b'{"kind":"hook","seq":1}') is None
    assert as_record(b'{"hash":"' + b"a" * 64 + b'","kind":"x","seq":0}') is not None
    assert as_record(b'{"hash":"' + b"a" * 64 + b'","kind":"x","seq":0} trailing') is None


@pytest.mark.parametrize(
    "value",
    [
        b'"\\ud800 alone"',  # a lone surrogate escape: orjson refuses it, json reads it
        b"NaN",  # never written (canonical JSON refuses it), but json reads it
        b"1e400",  # out of double range: orjson refuses it, json reads infinity
        b"-0.0",
        b"1e-7",
        b'"caf\\u00e9 \\"quoted\\""',
        b"123456789012345678901234567890",
    ],
)
def test_a_record_reads_as_the_standard_library_reads_it(value: bytes) -> None:
    line = b'{"hash":"' + b"a" * 64 + b'","kind":"x","seq":7,"v":' + value + b"}"
    expected = json.loads(line)
    exact = as_record(line, exact=True)
    assert exact is not None and repr(exact["v"]) == repr(expected["v"])
    fast = as_record(line)
    assert fast is not None
    if value.isdigit():  # the one documented difference: a float, equal as a number
        assert fast["v"] == float(expected["v"])
    else:
        assert repr(fast["v"]) == repr(expected["v"])


def test_a_seq_beyond_64_bits_stays_an_integer() -> None:
    big = 2**70
    line = b'{"hash":"' + b"a" * 64 + b'","kind":"x","seq":' + str(big).encode() + b"}"
    record = as_record(line)
    assert record is not None and record["seq"] == big and type(record["seq"]) is int
