"""The fallback spool taken into the audit log: valid lines, hostile lines, hostile files."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudrunner.audit import AuditWriter, verify_log
from cloudrunner.audit.fallback import (
    INGESTING_FILE,
    MAX_INVALID_RECORDS,
    MAX_LINE_BYTES,
    READ_BOUND,
    SPOOL_FILE,
    ingest,
    parse_line,
)
from cloudrunner.audit.filters import RecordFilter
from cloudrunner.audit.query import select
from cloudrunner.client.no_daemon import Decision, spool_line
from tests.support.audit_records import read_records


def line(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "version": 1,
        "time": "2026-12-04T18:00:00.123Z",
        "event": "beforeShellExecution",
        "outcome": "blocked",
        "answer": {"permission": "deny", "agent_message": "down"},
        "problem": "no daemon answers on unix:/run/cr/cloudrunner.sock (connection refused)",
        "decided_by": "policy",
        "policy_daemon": "w-1",
        "client": "cloudrunner-hook",
        "pid": 4321,
        "conversation_id": "c-1",
        "generation_id": "g-1",
        "payload_sha256": "ab" * 32,
    }
    base.update(changes)
    return base


def _spool(run: Path, *lines: bytes | dict[str, Any], name: str = SPOOL_FILE) -> Path:
    path = run / name
    with path.open("ab") as fh:
        for item in lines:
            fh.write(item if isinstance(item, bytes) else json.dumps(item).encode() + b"\n")
    return path


@pytest.fixture
def run(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    path.mkdir()
    return path


@pytest.fixture
def writer(tmp_path: Path) -> AuditWriter:
    return AuditWriter(tmp_path / "audit.log", worker="w-2", fsync="always")


def test_each_line_becomes_a_fallback_record_and_the_spool_goes(
    run: Path, writer: AuditWriter
) -> None:
    _spool(run, line(), line(outcome="allowed", answer={}, event="stop", decided_by="no-policy"))
    report = ingest(run, writer)
    writer.close()
    assert (report.records, report.invalid, report.problems) == (2, 0, ())
    assert report.outcomes == {"blocked": 1, "allowed": 1}
    assert not os.path.lexists(run / SPOOL_FILE)
    assert not os.path.lexists(run / INGESTING_FILE)
    first, second = read_records(writer.path)
    assert first["kind"] == "fallback"
    assert first["spool_line"] == 1 and second["spool_line"] == 2
    assert first["spool"] == str(run / SPOOL_FILE)
    assert first["answer"] == {"permission": "deny", "agent_message": "down"}
    assert first["client_time"] == "2026-12-04T18:00:00.123Z"
    assert first["client_pid"] == 4321
    assert first["pid"] == os.getpid()  # the record's own pid is the daemon's
    assert first["worker"] == "w-2"
    assert first["outcome"] == "blocked" and first["decided_by"] == "policy"
    assert (first["conversation_id"], first["generation_id"]) == ("c-1", "g-1")
    assert second["outcome"] == "allowed" and second["event"] == "stop"
    assert "invalid" not in first
    assert verify_log(writer.path).ok


def test_the_python_clients_own_lines_are_valid() -> None:
    decision = Decision(True, "policy")
    decision.policy_daemon = "w-1"
    payload = json.dumps({"conversation_id": "c" * 500, "generation_id": 7}).encode()
    raw = spool_line(
        "preToolUse", {"permission": "deny", "agent_message": "x" * 9000}, True, "p" * 9000,
        decision, payload,
    )  # fmt: skip
    fields = parse_line(raw.rstrip(b"\n"))
    assert fields["client"] == "cloudrunner hook"
    assert fields["conversation_id"] == "c" * 200 and fields["generation_id"] is None
    assert fields["payload_sha256"] == hashlib.sha256(payload).hexdigest()


def test_query_by_kind_outcome_and_decision(run: Path, writer: AuditWriter) -> None:
    writer.append("decision", {"event": "stop", "decision": {}})
    _spool(run, line(), line(outcome="allowed", answer={"permission": "allow"}))
    ingest(run, writer)
    writer.close()

    def found(**wanted: Any) -> list[int]:
        chosen = RecordFilter(**wanted)
        return [e.record["spool_line"] for e in select([writer.path], chosen, warn=print)]

    assert found(kinds=("fallback",)) == [1, 2]
    assert found(kinds=("fallback",), outcomes=("blocked",)) == [1]
    assert found(decisions=("deny",)) == [1]


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"not json at all", "not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b"", "empty"),
        (b"\xff\xfe", "not UTF-8"),
        (json.dumps(line(version=2)).encode(), '"version" must be 1'),
        (json.dumps(line(version=True)).encode(), '"version" must be 1'),
        (json.dumps(line(outcome="maybe")).encode(), '"outcome" must be one of'),
        (json.dumps(line(answer="deny")).encode(), '"answer" must be an object'),
        (json.dumps(line(pid=-1)).encode(), '"pid"'),
        (json.dumps(line(pid=True)).encode(), '"pid"'),
        (json.dumps(line(payload_sha256="AB" * 32)).encode(), "payload_sha256"),
        (json.dumps(line(client="curl")).encode(), '"client" must be one of'),
        (json.dumps(line(decided_by=None)).encode(), '"decided_by" must be a string'),
        (json.dumps(line(conversation_id=7)).encode(), '"conversation_id" must be a string'),
        (json.dumps(line(event="e" * 201)).encode(), '"event" is 201 characters'),
        (json.dumps(line(answer={"a": {"b": {"c": {"d": {"e": 1}}}}})).encode(), "nests"),
        (json.dumps(line(answer={"n": 1})).replace("1}", "NaN}").encode(), "NaN"),
        (json.dumps({k: v for k, v in line().items() if k != "problem"}).encode(), "missing"),
        (b"[" * 3000, "nests too deeply"),
    ],
)
def test_invalid_lines_say_why(raw: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        parse_line(raw)
    assert why in str(caught.value)


def test_garbage_oversized_and_valid_lines_together(run: Path, writer: AuditWriter) -> None:
    huge = b'{"version": 1, "problem": "' + b"x" * 10_000 + b'"}'
    _spool(run, b"garbage\n", huge + b"\n", line(), b'{"version": 1}')  # last: no newline
    report = ingest(run, writer)
    writer.close()
    assert (report.records, report.invalid) == (4, 3)
    assert report.outcomes == {"invalid": 3, "blocked": 1}
    garbage, oversized, valid, cut = read_records(writer.path)
    assert garbage["invalid"].startswith("the line is not JSON")
    assert garbage["line_sha256"] == hashlib.sha256(b"garbage").hexdigest()
    assert garbage["line_bytes"] == 7
    assert oversized["invalid"] == f"the line is {len(huge)} bytes, over the 4096-byte bound"
    assert oversized["line_sha256"] == hashlib.sha256(huge).hexdigest()
    assert "x" * 100 not in json.dumps(oversized)  # the text is never kept
    assert valid["outcome"] == "blocked" and valid["spool_line"] == 3
    assert cut["spool_line"] == 4 and "missing" in cut["invalid"]
    assert verify_log(writer.path).ok


def test_unknown_keys_are_named_not_kept(run: Path, writer: AuditWriter) -> None:
    _spool(run, line(seq=5, hash="0" * 64, kind="decision", extra={"x": 1}))
    ingest(run, writer)
    writer.close()
    (record,) = read_records(writer.path)
    assert record["kind"] == "fallback" and record["seq"] == 0
    assert record["ignored_keys"] == ["extra", "hash", "kind", "seq"]
    assert "extra" not in record
    assert verify_log(writer.path).ok


def test_invalid_lines_past_the_cap_are_counted_in_one_record(
    run: Path, writer: AuditWriter
) -> None:
    _spool(run, b"x\n" * (MAX_INVALID_RECORDS + 50), line())
    report = ingest(run, writer)
    writer.close()
    records = read_records(writer.path)
    assert report.invalid == MAX_INVALID_RECORDS + 50
    assert len(records) == MAX_INVALID_RECORDS + 2
    assert records[MAX_INVALID_RECORDS]["outcome"] == "blocked"
    assert records[-1]["invalid"].startswith("50 more invalid lines (from line 101 to 150)")


def test_a_spool_past_the_read_bound_is_read_no_further(run: Path, writer: AuditWriter) -> None:
    one = json.dumps(line()).encode() + b"\n"
    count = READ_BOUND // len(one) + 1
    _spool(run, one * count + b"y" * 5000)
    report = ingest(run, writer)
    writer.close()
    records = read_records(writer.path)
    assert len(records) == count + 1
    assert "past the" in records[-1]["invalid"] and records[-1]["line_bytes"] > 0
    assert report.invalid == 1


def test_a_leftover_from_a_crash_is_taken_first(run: Path, writer: AuditWriter) -> None:
    _spool(run, line(event="preToolUse"), name=INGESTING_FILE)
    _spool(run, line(event="stop"))
    report = ingest(run, writer)
    writer.close()
    assert report.records == 2
    assert [r["event"] for r in read_records(writer.path)] == ["preToolUse", "stop"]
    assert sorted(p.name for p in run.iterdir()) == []


def test_a_symlink_planted_as_the_spool_is_not_followed(
    tmp_path: Path, run: Path, writer: AuditWriter
) -> None:
    secret = tmp_path / "secret"
    secret.write_text(json.dumps(line(problem="from the target")) + "\n")
    (run / SPOOL_FILE).symlink_to(secret)
    report = ingest(run, writer)
    writer.close()
    (record,) = read_records(writer.path)
    assert record["invalid"] == "the spool is a symbolic link; it was not followed"
    assert "from the target" not in writer.path.read_text()
    assert report.invalid == 1
    assert secret.read_text().startswith("{")  # the target is untouched
    assert not os.path.lexists(run / SPOOL_FILE)  # the link itself is gone


def test_a_fifo_planted_as_the_spool_is_not_read(run: Path, writer: AuditWriter) -> None:
    os.mkfifo(run / SPOOL_FILE)
    report = ingest(run, writer)  # would hang if it were opened for reading blocking
    writer.close()
    (record,) = read_records(writer.path)
    assert record["invalid"] == "the spool is not a regular file; it was not read"
    assert report.problems == ()


def test_an_audit_log_that_cannot_be_written_keeps_the_spool(run: Path, tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("a file where the log's directory should be")
    writer = AuditWriter(tmp_path / "blocked" / "audit.log")
    _spool(run, line())
    report = ingest(run, writer)
    assert report.records == 0
    assert report.outcomes == {}  # nothing was recorded, so nothing is counted
    (problem,) = report.problems
    assert "could not all be recorded" in problem and "kept" in problem
    assert os.path.exists(run / INGESTING_FILE)  # taken again at the next start


def test_a_run_directory_that_is_not_there_is_a_problem_not_a_crash(
    tmp_path: Path, writer: AuditWriter
) -> None:
    report = ingest(tmp_path / "missing", writer)
    (problem,) = report.problems
    assert "cannot be taken" in problem and "No such file" in problem


def test_no_spool_no_records(run: Path, writer: AuditWriter) -> None:
    assert ingest(run, writer).records == 0
    writer.close()
    assert not writer.path.exists() or writer.path.read_text() == ""


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=MAX_LINE_BYTES + 10))
def test_any_bytes_give_a_record_or_a_reason(raw: bytes) -> None:
    try:
        fields = parse_line(raw)
    except ValueError as exc:
        assert str(exc)
    else:
        json.dumps(fields, allow_nan=False)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=300).filter(lambda b: b"\n" not in b),
            st.builds(lambda e: json.dumps(line(event=e)).encode(), st.text(max_size=50)),
        ),
        max_size=20,
    )
)
def test_any_spool_verifies(tmp_path_factory: pytest.TempPathFactory, lines: list[bytes]) -> None:
    base = tmp_path_factory.mktemp("spool")
    writer = AuditWriter(base / "audit.log")
    _spool(base, *(item + b"\n" for item in lines))
    report = ingest(base, writer)
    writer.close()
    assert report.records == len(lines) and report.problems == ()
    assert not lines or verify_log(writer.path).ok
    # the counts become metric labels: whatever the lines say, only these three
    assert set(report.outcomes) <= {"blocked", "allowed", "invalid"}
    assert sum(report.outcomes.values()) == report.records


def test_an_outcome_a_client_made_up_is_counted_as_invalid(run: Path, writer: AuditWriter) -> None:
    _spool(run, line(outcome="pwned"), line(outcome="allowed", answer={}))
    report = ingest(run, writer)
    writer.close()
    assert report.outcomes == {"invalid": 1, "allowed": 1}
