"""`audit verify` on real rotated sets tampered with: a record deleted, edited, reordered or
truncated, a rotation cut, compressed members; each caught and named by file and line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from cloudrunner.audit import AuditLogError, canonical_json, verify_log
from cloudrunner.audit.reader import log_set
from cloudrunner.cli import main
from tests.unit.audit.logs import sample_records, write_log

#: every test twice: files analysed in this process and in 2 processes
pytestmark = pytest.mark.usefixtures("verify_jobs")


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "audit.log"
    write_log(path, sample_records() * 3, max_bytes=1500)
    assert len(log_set(path)) >= 4
    return path


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def first(path: Path) -> tuple[str, int, int | None, str]:
    problem = verify_log(path).first_problem
    assert problem is not None
    return problem.file, problem.line, problem.seq, problem.message


def test_an_intact_rotated_set_verifies(log: Path) -> None:
    report = verify_log(log)
    assert report.ok and report.verdict == "ok" and report.records == 36


def test_a_deleted_record_in_a_rotated_file_is_named(log: Path) -> None:
    member = log_set(log)[1]
    lines = lines_of(member)
    gone = json.loads(lines[1])["seq"]
    member.write_bytes(b"".join(lines[:1] + lines[2:]))
    file, line, seq, message = first(log)
    assert (file, line, seq) == (str(member), 2, gone + 1)
    assert f"1 record (seq {gone}..{gone}) removed" in message
    assert verify_log(log).verdict == "broken"


def test_an_edited_record_is_named(log: Path) -> None:
    member = log_set(log)[2]
    lines = lines_of(member)
    record = json.loads(lines[0])
    record["outcome"] = "ok" if record.get("outcome") != "ok" else "blocked"
    lines[0] = (canonical_json(record) + "\n").encode()
    member.write_bytes(b"".join(lines))
    assert first(log) == (
        str(member), 1, record["seq"],
        "hash does not match the record's content: the record was altered",
    )  # fmt: skip


def test_reordered_records_are_named(log: Path) -> None:
    lines = lines_of(log)
    lines[0], lines[1] = lines[1], lines[0]
    log.write_bytes(b"".join(lines))
    file, line, _seq, message = first(log)
    assert (file, line) == (str(log), 1) and "removed" in message
    messages = [p.message for p in verify_log(log).problems]
    assert any("out of order or duplicated" in m for m in messages)


def test_a_truncated_last_record_is_a_crash_not_tampering(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = lines_of(log)
    log.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    report = verify_log(log)
    assert report.verdict == "truncated" and not report.ok
    assert report.truncated is not None and report.truncated.line == len(lines)
    assert main(["audit", "verify", str(log)]) == 1
    out = capsys.readouterr().out
    assert f"{log}:{len(lines)}: 40 bytes at offset" in out
    assert "audit log TRUNCATED:" in out and "crash mid-write (not tampering)" in out


def test_a_truncated_record_in_a_rotated_file_is_damage(log: Path) -> None:
    member = log_set(log)[0]
    lines = lines_of(member)
    member.write_bytes(b"".join(lines[:-1]) + lines[-1][:40] + b"\n")
    report = verify_log(log)
    assert report.verdict == "broken"
    assert report.first_problem is not None and report.first_problem.file == str(member)
    assert "no torn_record acknowledges it" in report.first_problem.message


def test_a_cut_rotation_is_named(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    middle = log.with_name("audit.log.2")
    middle.unlink()
    problems = verify_log(log).problems
    assert problems[0].message == f"rotated files missing from the set: {middle}"
    assert any("removed" in p.message for p in problems[1:])
    assert main(["audit", "verify", str(log), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "broken" and data["first_problem"]["message"].startswith(
        "rotated files missing"
    )


def test_the_oldest_file_removed_is_a_chain_starting_part_way(log: Path) -> None:
    oldest = log_set(log)[0]
    oldest.unlink()
    problems = verify_log(log).problems
    assert any("the chain starts at seq" in p.message for p in problems)


def test_compressed_rotated_files_verify_and_tampering_inside_is_found(log: Path) -> None:
    for member in log_set(log)[:-1]:
        member.with_name(member.name + ".gz").write_bytes(gzip.compress(member.read_bytes()))
        member.unlink()
    assert verify_log(log).ok and verify_log(log).records == 36
    packed = log_set(log)[1]
    lines = gzip.decompress(packed.read_bytes()).splitlines(keepends=True)
    packed.write_bytes(gzip.compress(b"".join(lines[:1] + lines[2:])))
    file, line, _seq, message = first(log)
    assert (file, line) == (str(packed), 2) and "removed" in message


def test_a_cut_compressed_member_is_an_error_naming_it(log: Path) -> None:
    member = log_set(log)[1]
    packed = gzip.compress(member.read_bytes())
    member.with_name(member.name + ".gz").write_bytes(packed[: len(packed) // 2])
    member.unlink()
    with pytest.raises(AuditLogError, match=rf"cannot read audit log {member}\.gz: .*cut short"):
        verify_log(log)


def test_several_logs_are_verified_one_by_one(
    tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other" / "audit.log"
    write_log(other, sample_records())
    assert main(["audit", "verify", str(log), str(other), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and [d["records"] for d in data["logs"]] == [36, 12]
    lines = lines_of(other)
    other.write_bytes(b"".join(lines[:3] + lines[4:]))
    assert main(["audit", "verify", str(log), str(other)]) == 1
    out = capsys.readouterr().out
    assert "audit log OK" in out
    assert f"audit log BROKEN: {other}: 1 problem; 11 records, seq 0..11; first at {other}:4" in out
