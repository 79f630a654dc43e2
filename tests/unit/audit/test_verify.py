"""verify_log and `cloudrunner audit verify` on real files, intact and tampered with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.audit import AuditLogError, AuditWriter, canonical_json, record_hash, verify_log
from cloudrunner.cli import main

#: every test twice: files analysed in this process and in 2 processes
pytestmark = pytest.mark.usefixtures("verify_jobs")


def make_log(path: Path, count: int, **options: Any) -> list[bytes]:
    with AuditWriter(path, worker="w", fsync="never", **options) as writer:
        for i in range(count):
            writer.append("hook", {"hook_index": i, "outcome": "ok"})
    return path.read_bytes().splitlines(keepends=True)


def rewrite(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def edit(line: bytes, **changes: Any) -> bytes:
    record = json.loads(line)
    record.update(changes)
    return (canonical_json(record) + "\n").encode()


def problems(path: Path) -> list[str]:
    return [p.text() for p in verify_log(path).problems]


def test_an_intact_log_verifies(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = make_log(log, 5)
    report = verify_log(log)
    assert report.ok and report.records == 5
    assert (report.first_seq, report.last_seq) == (0, 4)
    assert report.last_hash == json.loads(lines[-1])["hash"]


def test_an_empty_log_verifies_with_no_records(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.touch()
    assert verify_log(log).ok and verify_log(log).records == 0


def test_an_altered_record_is_named_by_file_line_and_seq(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = make_log(log, 5)
    lines[2] = edit(lines[2], outcome="blocked")
    rewrite(log, lines)
    assert problems(log) == [
        f"{log}:3: seq 2: hash does not match the record's content: the record was altered"
    ]


def test_an_altered_record_with_a_recomputed_hash_breaks_the_next_link(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = make_log(log, 4)
    record = json.loads(lines[1])
    record["outcome"] = "blocked"
    record["hash"] = record_hash(record)
    lines[1] = (canonical_json(record) + "\n").encode()
    rewrite(log, lines)
    (only,) = problems(log)
    assert only.startswith(f"{log}:3: seq 2: prev_hash does not match the hash of seq 1 ({log}:2)")


def test_a_removed_record_is_reported(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = make_log(log, 5)
    del lines[2]
    rewrite(log, lines)
    (only,) = problems(log)
    assert only.startswith(f"{log}:3: seq 3: follows seq 1 ({log}:2): 1 record (seq 2..2) removed")


def test_reordered_records_are_reported(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = make_log(log, 5)
    lines[1], lines[2] = lines[2], lines[1]
    rewrite(log, lines)
    found = problems(log)
    assert any("seq 2: follows seq 0" in p for p in found)
    assert any("seq 1: follows seq 2" in p and "out of order" in p for p in found)


def test_removing_the_first_records_is_reported(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = make_log(log, 3)
    rewrite(log, lines[1:])
    (only,) = problems(log)
    assert "starts at seq 1 instead of seq 0" in only


def test_an_inserted_json_line_is_reported(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = make_log(log, 3)
    lines.insert(1, b'{"kind":"hook","note":"forged"}\n')
    rewrite(log, lines)
    (only,) = problems(log)
    assert only.startswith(f"{log}:2: JSON that is not an audit record")


def test_an_unacknowledged_torn_tail_fails_with_what_will_happen(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = make_log(log, 2)
    offset = len(b"".join(lines))
    rewrite(log, [*lines, b'{"comm'])
    (only,) = problems(log)
    assert only == (
        f"{log}:3: 6 bytes at offset {offset}: a torn record (a writer was interrupted "
        "mid-line) that is not acknowledged yet; the next append acknowledges it"
    )
    assert verify_log(log).torn[0].acknowledged_by is None


def test_a_garbage_line_in_the_middle_is_reported(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = make_log(log, 3)
    lines.insert(1, b"garbage\n")
    rewrite(log, lines)
    (only,) = problems(log)
    assert only.startswith(f"{log}:2: 7 bytes at offset")
    assert "no torn_record acknowledges it" in only


def test_a_torn_record_whose_acknowledgement_was_edited_fails(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    make_log(log, 2)
    with log.open("ab") as handle:
        handle.write(b'{"comm')
    lines = make_log(log, 1)
    ack = json.loads(lines[3])
    assert ack["kind"] == "torn_record"
    ack["torn"][0]["length"] = 99
    ack["hash"] = record_hash(ack)
    lines[3] = (canonical_json(ack) + "\n").encode()
    rewrite(log, lines)
    found = problems(log)
    assert any(f"{log}:3:" in p and "no torn_record acknowledges it" in p for p in found)
    assert any(f"{log}:4: seq 2: torn_record does not follow" in p for p in found)


def test_verify_walks_the_rotated_set(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    make_log(log, 20, max_bytes=1200)
    report = verify_log(log)
    assert report.ok and report.records == 20
    assert len(report.files) >= 3 and report.files[-1] == str(log)


def test_a_removed_rotated_file_is_reported(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    make_log(log, 20, max_bytes=1200)
    (tmp_path / "audit.log.2").unlink()
    found = problems(log)
    assert any(f"rotated files missing from the set: {log}.2" in p for p in found)
    assert any("removed" in p for p in found)


def test_a_file_that_is_no_audit_log_is_a_one_line_error(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_bytes(b"\x00\x01binary\nnot json\n")
    with pytest.raises(AuditLogError, match=r"notes\.txt is not a cloudrunner audit log"):
        verify_log(other)


def test_a_missing_file_and_a_directory_are_errors(tmp_path: Path) -> None:
    with pytest.raises(AuditLogError, match="does not exist"):
        verify_log(tmp_path / "missing.log")
    with pytest.raises(AuditLogError, match="is a directory"):
        verify_log(tmp_path)


# -- the command ------------------------------------------------------------------------------


def test_cli_exits_0_and_summarises_an_intact_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "audit.log"
    make_log(log, 3)
    assert main(["audit", "verify", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"audit log OK: {log}: 3 records, seq 0..2" in out


def test_cli_reports_acknowledged_torn_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "audit.log"
    make_log(log, 1)
    with log.open("ab") as handle:
        handle.write(b'{"hash":"ab')
    make_log(log, 1)
    assert main(["audit", "verify", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"torn: {log}:2: 11 bytes at offset" in out
    assert "acknowledged by seq 1" in out
    assert "1 torn record(s) acknowledged" in out


def test_cli_exits_1_on_a_broken_chain_with_json_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "audit.log"
    lines = make_log(log, 3)
    lines[1] = edit(lines[1], outcome="error")
    rewrite(log, lines)
    assert main(["audit", "verify", "--format", "json", str(log)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert report["problems"] == [
        {
            "file": str(log),
            "line": 2,
            "seq": 1,
            "message": "hash does not match the record's content: the record was altered",
        }
    ]


def test_cli_turns_an_unreadable_file_into_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "verify", str(tmp_path / "nope.log")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("cloudrunner: error: audit log ") and "does not exist" in err


#: values that orjson reads or writes differently from the standard library's canonical JSON
AWKWARD = [
    {"stdout_excerpt": "café ☕ naïve"},  # non-ASCII: the line has \u escapes
    {"duration_ms": 1e-07, "size": 1e16},  # floats whose spelling differs
    {"pid_like": 2**70, "negative": -(2**65)},  # integers beyond 64 bits
    {"text": "tab\there, nul \u0000, del \u007f, line\u2028sep"},
]


@pytest.mark.parametrize("fields", AWKWARD, ids=["non-ascii", "floats", "big-ints", "controls"])
def test_records_that_orjson_spells_differently_verify_and_edits_are_caught(
    tmp_path: Path, fields: dict[str, Any]
) -> None:
    log = tmp_path / "audit.log"
    with AuditWriter(log, worker="w", fsync="never") as writer:
        for i in range(4):
            writer.append("hook", {"hook_index": i, **fields})
    report = verify_log(log)
    assert report.ok and report.records == 4, [p.text() for p in report.problems]
    lines = log.read_bytes().splitlines(keepends=True)
    lines[2] = edit(lines[2], hook_index=99)
    rewrite(log, lines)
    assert problems(log) == [
        f"{log}:3: seq 2: hash does not match the record's content: the record was altered"
    ]


def test_plain_records_take_the_fast_path_and_awkward_ones_the_exact_one(tmp_path: Path) -> None:
    from cloudrunner.audit.verify import _confirmed

    log = tmp_path / "audit.log"
    with AuditWriter(log, worker="w", fsync="never") as writer:
        writer.append("hook", {"outcome": "ok", "duration_ms": 12.5})
        writer.append("hook", {"stdout_excerpt": "café"})
    plain, awkward = log.read_bytes().splitlines()
    facts = _confirmed(plain)
    assert facts is not None and facts.seq == 0 and facts.hash_ok
    assert _confirmed(awkward) is None  # the standard library decides this one
    assert _confirmed(plain.replace(b'"ok"', b'"no"')) is None  # an edit is never confirmed
