"""`audit verify` and events: a `received` record with no `decision` is an incomplete event."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cloudrunner.audit import AuditWriter, RecordKind, verify_log
from cloudrunner.commands.audit import render_text


def _event(writer: AuditWriter, *, decided: bool, event: str = "stop") -> int:
    received = writer.append(RecordKind.RECEIVED, {"event": event, "hooks": ["h"]})
    seq = received["seq"]
    writer.append(RecordKind.HOOK, {"event": event, "event_seq": seq, "outcome": "ok"})
    if decided:
        writer.append(RecordKind.DECISION, {"event": event, "event_seq": seq, "decision": {}})
    return int(seq)


def test_every_received_event_decided_is_ok(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    with AuditWriter(log) as writer:
        for _ in range(3):
            _event(writer, decided=True)
        writer.append(RecordKind.REFUSED, {"event": "x", "reason": "bad"})
    report = verify_log(log)
    assert report.ok and report.verdict == "ok" and report.incomplete == []


def test_an_event_without_its_decision_is_incomplete_by_its_seq(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    with AuditWriter(log) as writer:
        _event(writer, decided=True)
        lost = _event(writer, decided=False, event="beforeShellExecution")
        _event(writer, decided=True)
    for jobs in (1, 2):
        report = verify_log(log, jobs=jobs)
        assert not report.ok and report.problems == []
        assert report.verdict == "incomplete"
        (problem,) = report.incomplete
        assert problem.seq == lost and problem.line == lost + 1
        assert "beforeShellExecution event received here has no decision record" in (
            problem.message
        )
    text = render_text(report)
    assert f"incomplete: {log}:{lost + 1}: seq {lost}:" in text
    assert f"audit log INCOMPLETE: {log}: the chain holds, but 1 event has no decision" in text


def test_a_decision_in_the_next_rotated_file_closes_the_event(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    with AuditWriter(log, max_bytes=400) as writer:
        for _ in range(6):
            _event(writer, decided=True)
    assert len(list(tmp_path.glob("audit.log*"))) > 2
    assert verify_log(log).ok


def test_the_command_exits_1_and_says_incomplete_in_json(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    with AuditWriter(log) as writer:
        lost = _event(writer, decided=False)
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "audit", "verify", "--format", "json", str(log)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["ok"], data["verdict"]) == (False, "incomplete")
    assert [p["seq"] for p in data["incomplete"]] == [lost]


def test_query_and_stats_read_the_new_kind(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    with AuditWriter(log) as writer:
        _event(writer, decided=True)
    for command in (["query", "--kind", "received"], ["stats"]):
        proc = subprocess.run(
            [sys.executable, "-m", "cloudrunner", "audit", *command, str(log)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
    query = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "audit", "query", "--kind", "received", "--format",
         "json", str(log)], capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "received" in query.stdout
