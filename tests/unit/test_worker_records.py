"""The worker's record path without hooks (no engine needed): refusals of payloads that
cannot be kept, the `received` record before anything runs, and an unwritable log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudrunner.audit import verify_log
from cloudrunner.settings import Settings, load_settings
from cloudrunner.worker import AUDIT_UNWRITABLE_EXIT, EventNotRecorded, PayloadRefused, Worker
from tests.support.audit_records import read_records
from tests.support.git_repos import committed_repo


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    committed_repo(ws, "empty")
    return ws


def _settings(root: Path, ws: Path, audit: Path | None = None) -> Settings:
    overrides: dict[str, Any] = {"state_dir": str(root / "state"), "workspace.path": str(ws),
                                 "worker_id": "unit-records"}  # fmt: skip
    if audit is not None:
        overrides["audit.path"] = str(audit)
    return load_settings(environ={}, overrides=overrides)


@pytest.fixture
def worker(tmp_path: Path) -> Worker:
    return Worker(_settings(tmp_path, _workspace(tmp_path)), reap=False)


def test_an_event_opens_with_received_and_closes_with_its_decision(worker: Worker) -> None:
    payload = {"conversation_id": "c1", "hook_event_name": "stop", "status": "completed"}
    reply = worker.handle(json.dumps(payload).encode())
    assert reply.answer == {} and reply.unrecorded == ()
    records = read_records(worker.settings.audit_path)
    received = records[0]
    assert received["kind"] == "received" and received["event"] == "stop"
    assert received["hooks"] == [] and "payload" not in received  # payload kept once
    assert all(r["event_seq"] == received["seq"] for r in records[1:])
    assert records[-1]["kind"] == "decision"
    assert verify_log(worker.settings.audit_path).ok


def test_an_event_that_runs_no_hook_is_synced_once(worker: Worker) -> None:
    """No hook runs, so nothing waits for its `received` record but the answer: it goes to
    disk with the decision, in the one sync the answer waits for."""
    payload = {"conversation_id": "c1", "hook_event_name": "stop", "status": "completed"}
    before = worker.audit.syncs
    worker.handle(json.dumps(payload).encode())
    assert worker.audit.syncs - before == 1
    kinds = [r["kind"] for r in read_records(worker.settings.audit_path)]
    assert kinds[0] == "received" and kinds[-1] == "decision"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ('{"conversation_id": "c\\ud800", "hook_event_name": "stop"}', "lone UTF-16 surrogate"),
        ('{"hook_event_name": "stop", "tool_input": ' + "[" * 980 + "]" * 980 + "}",
         "nested deeper than 64 levels"),
        ('{"hook_event_name": "stop", "workspace_roots": ["/w\\u0000"]}', "holds a NUL"),
        ('{"hook_event_name": "stop\\u0000", "conversation_id": "a\\u0000"}', "holds a NUL"),
    ],
)  # fmt: skip
def test_a_payload_that_cannot_be_kept_is_refused_and_recorded(
    worker: Worker, raw: str, says: str
) -> None:
    with pytest.raises(PayloadRefused) as caught:
        worker.handle(raw.encode())
    assert caught.value.code == "payload-unencodable"
    assert says in caught.value.message and "\n" not in caught.value.message
    (refused,) = read_records(worker.settings.audit_path)
    assert refused["kind"] == "refused" and refused["payload"] == {}
    assert says in refused["reason"]
    assert verify_log(worker.settings.audit_path).ok


def test_an_id_with_a_nul_is_recorded_escaped(worker: Worker) -> None:
    raw = b'{"hook_event_name": "stop", "conversation_id": "a\\u0000b\\ud800"}'
    with pytest.raises(PayloadRefused):
        worker.handle(raw)
    (refused,) = read_records(worker.settings.audit_path)
    assert refused["event"] == "stop" and refused["payload"] == {}
    assert refused["conversation_id"] == "a\\x00b\\ud800"  # escaped text, nothing raw


def test_an_unwritable_log_runs_nothing_and_names_the_cause(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    ws = _workspace(tmp_path)
    worker = Worker(_settings(tmp_path, ws, audit=blocker / "audit.log"), reap=False)
    payload = {"conversation_id": "c1", "hook_event_name": "stop"}
    with pytest.raises(EventNotRecorded) as caught:
        worker.handle(json.dumps(payload).encode())
    assert caught.value.code == "audit-unwritable"
    assert caught.value.exit_code == AUDIT_UNWRITABLE_EXIT == 74
    assert "its first audit record could not be written" in caught.value.message
    # a refusal that cannot be recorded fails the same way
    with pytest.raises(EventNotRecorded, match="could not be recorded either"):
        worker.handle(b"[]")


def test_run_exits_74_with_one_line_when_the_log_is_unwritable(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    ws = _workspace(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "run", "--workspace", str(ws), "--state-dir",
         str(tmp_path / "state"), "--audit-log", str(blocker / "audit.log")],
        input=b'{"conversation_id": "c1", "hook_event_name": "stop"}',
        capture_output=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 74
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "first audit record could not be written" in lines[0]
    assert proc.stdout == b""


_IDS = st.text(alphabet=st.characters(codec=None), max_size=12)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.characters(), max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet=st.characters(), max_size=4), inner, max_size=3)
    ),
    max_leaves=20,
)


@given(
    conversation=_IDS,
    extra=st.dictionaries(st.text(max_size=6), _VALUES, max_size=3),
    deep=st.integers(min_value=0, max_value=200),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
def test_any_payload_is_answered_or_refused_and_the_log_tells_the_truth(
    tmp_path_factory: pytest.TempPathFactory, conversation: str, extra: dict[str, Any], deep: int
) -> None:
    root = tmp_path_factory.mktemp("prop")
    worker = Worker(_settings(root, _workspace(root)), reap=False)
    document: dict[str, Any] = {**extra, "hook_event_name": "stop", "conversation_id": conversation}
    nested: Any = 1
    for _ in range(deep):
        nested = [nested]
    document["tool_input"] = nested
    raw = json.dumps(document).encode()  # ensure_ascii: surrogates travel as \ud800 escapes
    try:
        reply = worker.handle(raw)
    except PayloadRefused as exc:
        assert "\n" not in exc.message
        kinds = [r["kind"] for r in read_records(worker.settings.audit_path)]
        assert kinds == ["refused"]
    else:
        assert reply.answer == {}
        records = read_records(worker.settings.audit_path)
        assert records[0]["kind"] == "received" and records[-1]["kind"] == "decision"
    report = verify_log(worker.settings.audit_path)
    assert report.ok, (report.problems, report.incomplete)
    worker.close()


def test_the_session_state_is_written_only_when_what_it_holds_changes(worker: Worker) -> None:
    """A daemon's event reads the conversation's state once and rewrites it only when the
    sources' versions changed (or at sessionStart), not on every event."""
    payload = json.dumps({"conversation_id": "c-state", "hook_event_name": "stop",
                          "status": "completed"}).encode()  # fmt: skip
    worker.handle(payload)
    (state_file,) = (worker.settings.state_dir / "sessions").glob("*.json")
    first = state_file.stat()
    worker.handle(payload)
    again = state_file.stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    hooks = Path(worker.settings.workspace.path or "") / ".cursor" / "hooks.json"
    hooks.parent.mkdir()
    hooks.write_text('{"version": 1, "hooks": {}}')
    worker.handle(payload)
    changed = json.loads(state_file.read_text())["source_hashes"]
    assert any(key.startswith("project:") and value for key, value in changed.items())


class _Sandbox:
    """A warm sandbox stand-in: answers every hook, noting what the log had synced."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.runs: list[bool] = []
        self.closed = 0

    def run(self, request: Any) -> Any:
        from cloudrunner.protocol.outcomes import Outcome
        from cloudrunner.sandbox.base import ExecResult

        audit = self.worker.audit
        # every record written so far, the event's `received` included, is on disk
        self.runs.append(audit._group.durable == audit._generation)
        return ExecResult(0, b"{}", b"", 0.001, Outcome.OK, "", "fake-1", {})

    def close(self) -> None:
        self.closed += 1


class _Pool:
    def __init__(self) -> None:
        self.sandbox: _Sandbox | None = None

    def borrow(self, spec: Any) -> _Sandbox:
        assert self.sandbox is not None
        return self.sandbox


def _hooked_worker(tmp_path: Path) -> tuple[Worker, _Sandbox]:
    ws = _workspace(tmp_path)
    (ws / ".cursor").mkdir()
    (ws / ".cursor" / "hooks.json").write_text(
        json.dumps({"version": 1, "hooks": {"stop": [{"command": "true"}]}})
    )
    settings = load_settings(
        environ={},
        overrides={"state_dir": str(tmp_path / "state"), "workspace.path": str(ws),
                   "worker_id": "unit-records", "sandbox.isolation": "session",
                   "home.enabled": False},
    )  # fmt: skip
    pool = _Pool()
    worker = Worker(settings, reap=False, pool=pool)  # type: ignore[arg-type]
    pool.sandbox = _Sandbox(worker)
    return worker, pool.sandbox


def test_the_first_record_is_durable_before_the_hook_starts_its_sync_beside_the_borrow(
    tmp_path: Path,
) -> None:
    worker, sandbox = _hooked_worker(tmp_path)
    payload = {"conversation_id": "c1", "hook_event_name": "stop", "status": "completed"}
    for _ in range(3):
        reply = worker.handle(json.dumps(payload).encode())
        assert reply.answer == {} and reply.records >= 2
    assert sandbox.runs == [True, True, True]
    assert sandbox.closed == 3  # each borrow given back
    worker.close()
    assert verify_log(worker.settings.audit_path).ok


def test_a_first_record_that_cannot_be_synced_runs_no_hook_and_gives_the_sandbox_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    worker, sandbox = _hooked_worker(tmp_path)

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    payload = {"conversation_id": "c1", "hook_event_name": "stop", "status": "completed"}
    with pytest.raises(EventNotRecorded, match="its first audit record could not be written"):
        worker.handle(json.dumps(payload).encode())
    assert sandbox.runs == []
    assert sandbox.closed == 1
