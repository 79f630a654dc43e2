"""`audit query` filters and formats, and the filter pieces behind them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cloudrunner.audit.filters import RecordFilter, decision_label, parse_time
from cloudrunner.cli import main
from tests.unit.audit.logs import sample_records, write_log


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "audit.log"
    write_log(path, sample_records() * 2, max_bytes=2000)
    return path


def query(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    assert main(["audit", "query", *args, "--format", "json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_filters_combine_and_repeat(
    log: Path, capsys: pytest.CaptureFixture[str], jobs: str
) -> None:
    found = query(capsys, str(log), "--jobs", jobs, "--outcome", "blocked", "--outcome",
                  "timeout", "--source", "project")  # fmt: skip
    assert [(r["outcome"], r["source"]) for r in found] == [("blocked", "project")] * 4
    found = query(capsys, str(log), "--jobs", jobs, "--conversation", "c2")
    assert {r["conversation_id"] for r in found} == {"c2"} and len(found) == 6
    found = query(capsys, str(log), "--jobs", jobs, "--session", "c2", "--kind", "decision")
    assert len(found) == 2


def test_event_command_and_decision_filters(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = query(capsys, str(log), "--event", "stop")
    assert {r["event"] for r in found} == {"stop"} and len(found) == 4
    found = query(capsys, str(log), "--command", "guard")
    assert {r["command"] for r in found} == {".cursor/hooks/guard.sh"} and len(found) == 6
    found = query(capsys, str(log), "--kind", "decision", "--decision", "deny")
    assert [r["payload"] for r in found] == [{"command": "rm -rf /"}] * 4
    found = query(capsys, str(log), "--decision", "followup", "--kind", "decision")
    assert len(found) == 2
    found = query(capsys, str(log), "--kind", "gated", "--decision", "allow")
    assert len(found) == 2


def test_a_time_range_is_inclusive(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # one record a second from 12:00:00; the second copy of the session starts at 12:00:12
    found = query(capsys, str(log), "--since", "2025-03-01T12:00:03Z",
                  "--until", "2025-03-01T12:00:05Z")  # fmt: skip
    assert [r["seq"] for r in found] == [3, 4, 5]
    found = query(capsys, str(log), "--since", "2025-03-01T13:00:13+01:00")
    assert found[0]["seq"] == 13 and len(found) == 11


def test_json_lines_are_the_records_as_written(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "query", str(log), "--format", "json", "--limit", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == _all_lines(log)[:3]


def _all_lines(log: Path) -> list[str]:
    from cloudrunner.audit.reader import log_set

    return [line for path in log_set(log) for line in path.read_text().splitlines()]


def test_the_table_is_aligned_with_fixed_columns(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["audit", "query", str(log), "--event", "beforeShellExecution", "--limit", "3"]) == 0
    )
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["TIME", "SEQ", "KIND", "EVENT", "SOURCE", "HOOK", "OUTCOME",
                              "DECISION", "MS", "CONVERSATION"]  # fmt: skip
    assert len(rows) == 3
    column = header.index("OUTCOME")
    assert rows[0][column:].startswith("ok ") and rows[2][column:].startswith("  ")
    assert rows[1].split()[-2:] == ["20.0", "c1"]
    assert {row.index("c1") for row in rows} == {header.index("CONVERSATION")}


def test_bad_times_and_logs_are_one_line_errors(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "query", str(log), "--since", "yesterday"]) == 2
    assert "--since 'yesterday' is not a time" in capsys.readouterr().err
    other = tmp_path / "notes.txt"
    other.write_text("not a log\n")
    assert main(["audit", "query", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a cloudrunner audit log" in err


def test_query_warns_on_stderr_about_a_truncated_tail(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with log.open("ab") as handle:
        handle.write(b'{"command":".cursor/hooks/guard.sh","dur')
    assert main(["audit", "query", str(log), "--jobs", "1", "--command", "guard"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 7  # header and six rows
    assert "the last record is truncated (40 bytes): most likely a writer crashed" in captured.err


def test_decision_labels() -> None:
    assert decision_label({"permission": "ask"}) == "ask"
    assert decision_label({"continue": False, "user_message": "no"}) == "block"
    assert decision_label({"followup_message": "again"}) == "followup"
    assert decision_label({"continue": True}) == "allow"
    assert decision_label({}) == "none"
    assert decision_label(None) is None


def test_parse_time_takes_iso_dates_offsets_and_ages() -> None:
    now = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    assert parse_time("2025-03-01") == "2025-03-01T00:00:00.000000Z"
    assert parse_time("2025-03-01T14:00:00+02:00") == "2025-03-01T12:00:00.000000Z"
    assert parse_time("90m", now=now) == "2025-03-01T10:30:00.000000Z"
    assert parse_time("2d", now=now) == "2025-02-27T12:00:00.000000Z"


def test_the_byte_prefilter_never_rejects_a_matching_record() -> None:
    record = {"kind": "hook", "event": "stop", "command": 'say "hi" ünï', "outcome": "ok"}
    from cloudrunner.audit import canonical_json

    raw = canonical_json(record).encode()
    chosen = RecordFilter(kinds=("hook",), events=("stop",), commands=('"hi" ün',))
    accept = chosen.accept()
    assert accept is not None and accept(raw) and chosen.matches(record)
    assert not accept(raw.replace(b'"stop"', b'"stip"'))


@pytest.mark.parametrize("limit", ["0", "1", "5", "13", "200"])
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_a_limit_reads_files_in_parallel_and_prints_what_one_process_prints(
    log: Path, capsys: pytest.CaptureFixture[str], limit: str, fmt: str
) -> None:
    # a torn line inside the set: its warning must come out at the same point either way
    from cloudrunner.audit.reader import log_set

    oldest, middle = log_set(log)[:2]
    before = len(oldest.read_bytes().splitlines()) + 1  # records read before the torn line
    lines = middle.read_bytes().splitlines(keepends=True)
    middle.write_bytes(b"".join([*lines[:1], b'{"torn\n', *lines[1:]]))
    assert len(log_set(log)) > 3  # several files, so --limit 5 and 13 end mid-set
    outputs = []
    for jobs in ("1", "2"):
        argv = ["audit", "query", str(log), "--jobs", jobs, "--limit", limit, "--format", fmt]
        assert main(argv) == 0
        outputs.append(capsys.readouterr())
    single, parallel = outputs
    assert parallel.out == single.out and parallel.err == single.err
    rows = parallel.out.splitlines()[1 if fmt == "table" else 0 :]
    assert len(rows) == min(int(limit), 24)
    # reading stops at the limit-th record: the torn line is reached only past `before`
    assert ("a torn write" in parallel.err) == (int(limit) > before)


def test_a_negative_limit_is_a_usage_error(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "query", str(log), "--limit", "-1"]) == 2
    assert "--limit -1: give 0 or more records" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["query", "stats", "tail", "export"])
@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("--kind", "bogus", "egress"),
        ("--kind", "Hook", "hook"),  # the spelling is exact, as in the records
        ("--kind", "", "decision"),
        ("--event", "stp", "stop"),
        ("--event", "beforeShellExecution\n", "beforeShellExecution"),
    ],
)
def test_an_unknown_kind_or_event_is_a_one_line_error_naming_the_valid_values(
    log: Path, capsys: pytest.CaptureFixture[str], command: str, flag: str, value: str, named: str
) -> None:
    assert main(["audit", command, str(log), flag, value]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert f"{flag} {value!r} is not one of:" in captured.err and named in captured.err


def test_every_record_kind_and_event_is_a_valid_filter(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cloudrunner.audit.records import RecordKind
    from cloudrunner.protocol.events import EVENTS

    for kind in RecordKind:
        query(capsys, str(log), "--kind", kind.value)
    for event in EVENTS:
        query(capsys, str(log), "--event", event)


def test_the_event_names_the_filters_take_are_the_protocols() -> None:
    from cloudrunner.audit.filters import EVENT_NAMES
    from cloudrunner.protocol.events import EVENTS

    assert tuple(EVENTS) == EVENT_NAMES


def test_columns_choose_and_order_the_table(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["audit", "query", str(log), "--kind", "decision", "--decision", "deny"]
    assert main([*args, "--columns", "seq,event,decision,conversation"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["SEQ", "EVENT", "DECISION", "CONVERSATION"]
    assert all(line.split()[1:3] == ["beforeShellExecution", "deny"] for line in lines[1:])
    assert len(lines) == 5 and max(map(len, lines)) < 60
    # the order given is the order shown, names are case-insensitive
    assert main([*args, "--columns", "DECISION,seq"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["DECISION", "SEQ"]


@pytest.mark.parametrize(
    ("value", "message"),
    [("seq,bogus", "'bogus' is not a column"), ("seq,seq", "given twice"), ("", "'' is not")],
)
def test_columns_refuse_unknown_or_repeated_names(
    log: Path, capsys: pytest.CaptureFixture[str], value: str, message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["audit", "query", str(log), "--columns", value])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_tail_takes_the_same_columns(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "tail", str(log), "-n", "2", "--columns", "seq,kind"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["SEQ", "KIND"] and len(lines) == 3
