"""The whole event pipeline without an engine: a fake SandboxProvider answers each hook
from a table, so gate, refusals, tiers, blocks, loop limits and failed sandboxes are seen
end to end (records included) in plain unit tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.audit import verify_log
from cloudrunner.event import gate
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.settings import load_settings
from cloudrunner.worker import PayloadRefused, Worker
from tests.support.audit_records import read_records
from tests.support.cloud_payloads import shell_payload
from tests.support.git_repos import committed_repo
from tests.unit.event.fakes import FakeSandboxes


def _worker(
    tmp_path: Path,
    project: dict[str, Any],
    sandboxes: FakeSandboxes,
    team: dict[str, Any] | None = None,
) -> Worker:
    ws = tmp_path / "ws"
    (ws / ".cursor").mkdir(parents=True)
    (ws / ".cursor" / "hooks.json").write_text(json.dumps({"version": 1, "hooks": project}))
    committed_repo(ws, "hooks")
    overrides: dict[str, Any] = {
        "state_dir": str(tmp_path / "state"),
        "workspace.path": str(ws),
        "worker_id": "unit-pipeline",
        "home.enabled": False,
        "sources.enterprise_hooks": str(tmp_path / "no-enterprise.json"),
    }
    if team is not None:
        team_file = tmp_path / "team.json"
        team_file.write_text(json.dumps({"version": 1, "hooks": team}))
        overrides["sources.team_hooks"] = str(team_file)
    settings = load_settings(environ={}, overrides=overrides)
    return Worker(settings, reap=False, sandboxes=sandboxes)


def test_one_tier_runs_its_hook_and_records_the_event(tmp_path: Path) -> None:
    sandboxes = FakeSandboxes({"p": (0, '{"permission": "allow"}', "")})
    worker = _worker(tmp_path, {"beforeShellExecution": [{"command": "p"}]}, sandboxes)
    reply = worker.handle(shell_payload())
    assert reply.answer["permission"] == "allow"
    assert sandboxes.ran == ["p"]
    assert [r.kind for r in sandboxes.requests] == [SourceKind.PROJECT]
    # (a `skipped` record may say why another source did not load)
    received, hook, decision = (
        r for r in read_records(worker.settings.audit_path) if r["kind"] != "skipped"
    )
    assert [received["kind"], hook["kind"], decision["kind"]] == ["received", "hook", "decision"]
    assert hook["event_seq"] == decision["event_seq"] == received["seq"]
    assert hook["outcome"] == "ok" and hook["sandbox_id"] == "fake-1"
    worker.close()
    assert verify_log(worker.settings.audit_path).ok


def test_a_block_in_the_higher_tier_skips_the_lower_one(tmp_path: Path) -> None:
    sandboxes = FakeSandboxes({"t": (2, "", "team says no")})
    worker = _worker(
        tmp_path,
        {"beforeShellExecution": [{"command": "p"}]},
        sandboxes,
        team={"beforeShellExecution": [{"command": "t"}]},
    )
    reply = worker.handle(shell_payload())
    assert reply.answer == {"permission": "deny", "agent_message": "team says no"}
    assert sandboxes.ran == ["t"]  # the project tier never ran
    records = read_records(worker.settings.audit_path)
    hooks = {r["command"]: r for r in records if r["kind"] == "hook"}
    assert hooks["t"]["source"] == "team" and hooks["p"]["outcome"] == "skipped"
    (decision,) = (r for r in records if r["kind"] == "decision")
    assert decision["blocked_by"] is not None and decision["decision"] == reply.answer
    worker.close()


def test_a_closed_gate_answers_neutrally_and_runs_nothing(tmp_path: Path) -> None:
    sandboxes = FakeSandboxes()
    worker = _worker(tmp_path, {"beforeShellExecution": [{"command": "p"}]}, sandboxes)
    gate.set_mode(worker.gate_dir, gate.GateMode.CLOSED)
    reply = worker.handle(shell_payload())
    assert reply.gated and sandboxes.ran == [] and sandboxes.requests == []
    assert [r["kind"] for r in read_records(worker.settings.audit_path)] == ["gated"]
    worker.close()


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"not json", "payload-not-json"),
        (b"[]", "payload-not-json"),
        (b"{}", "event-missing"),
        (b'{"hook_event_name": "noSuchEvent"}', "unknown-event"),
        (b'{"hook_event_name": "beforeShellExecution", "command": 3}', "payload-invalid"),
    ],
)
def test_a_refused_payload_is_recorded_and_runs_nothing(
    tmp_path: Path, raw: bytes, code: str
) -> None:
    sandboxes = FakeSandboxes()
    worker = _worker(tmp_path, {"beforeShellExecution": [{"command": "p"}]}, sandboxes)
    with pytest.raises(PayloadRefused) as caught:
        worker.handle(raw)
    assert caught.value.code == code
    assert sandboxes.requests == []
    (refused,) = read_records(worker.settings.audit_path)
    assert refused["kind"] == "refused" and refused["reason"] == caught.value.message
    worker.close()


def test_a_stop_followup_is_dropped_over_its_loop_limit(tmp_path: Path) -> None:
    followup = json.dumps({"followup_message": "again"})
    sandboxes = FakeSandboxes({"s": (0, followup, "")})
    worker = _worker(tmp_path, {"stop": [{"command": "s", "loop_limit": 1}]}, sandboxes)
    stop = json.dumps(
        {"hook_event_name": "stop", "conversation_id": "c1", "status": "completed"}
    ).encode()
    assert worker.handle(stop).answer == {"followup_message": "again"}
    assert worker.handle(stop).answer == {}  # the budget of one is spent
    hooks = [r for r in read_records(worker.settings.audit_path) if r["kind"] == "hook"]
    assert "over loop_limit" in json.dumps(hooks[-1]["merge_fields"])
    worker.close()


def test_a_sandbox_that_cannot_open_fails_its_hook_and_a_fail_closed_one_blocks(
    tmp_path: Path,
) -> None:
    sandboxes = FakeSandboxes(broken=frozenset({SourceKind.PROJECT}))
    worker = _worker(
        tmp_path, {"beforeShellExecution": [{"command": "p", "failClosed": True}]}, sandboxes
    )
    reply = worker.handle(shell_payload())
    assert reply.answer["permission"] == "deny"
    assert sandboxes.ran == []
    (hook,) = (r for r in read_records(worker.settings.audit_path) if r["kind"] == "hook")
    assert hook["outcome"] == "sandbox_error"
    assert "no sandbox for project hooks here" in hook["reason"]
    worker.close()


def test_records_lost_after_the_hooks_ran_keep_the_answer_and_are_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while the hooks run: the hooks' answer stands and the loss is one
    warning on the operational log, never an exception out of the pipeline."""
    import structlog.testing

    sandboxes = FakeSandboxes({"p": (0, '{"permission": "deny"}', "")})
    worker = _worker(tmp_path, {"beforeShellExecution": [{"command": "p"}]}, sandboxes)

    def full(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(worker.pipeline.audit, "append_many", full)
    with structlog.testing.capture_logs() as logs:
        reply = worker.handle(shell_payload())
    assert reply.answer["permission"] == "deny"
    (warning,) = [e for e in logs if e["event"] == "worker.event_unrecorded"]
    assert warning["log_level"] == "warning" and warning["hook_event"] == "beforeShellExecution"
    assert "could not be written" in warning["problem"]
    worker.close()


# -- prepared, then synced: on the event's own thread ------------------------------------


class _Borrowed:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_the_first_record_is_synced_after_the_preparation_and_before_the_hooks() -> None:
    from cloudrunner.event.pipeline import EventPipeline, Prepared

    order: list[str] = []
    borrowed = _Borrowed()

    def prepare() -> Prepared:
        order.append("prepare")
        return Prepared(None, {}, borrowed)  # type: ignore[arg-type]

    prepared = EventPipeline._prepare_then_sync(prepare, lambda: order.append("sync"))
    assert order == ["prepare", "sync"] and prepared.sandboxes is borrowed
    assert borrowed.closed == 0


def test_a_failed_preparation_still_syncs_the_record_and_a_failed_sync_gives_back() -> None:
    from cloudrunner.event.pipeline import EventPipeline, Prepared
    from cloudrunner.event.stage_errors import EventNotRecorded

    synced: list[bool] = []

    def broken() -> Prepared:
        raise RuntimeError("the transcript cannot be read")

    with pytest.raises(RuntimeError, match="transcript"):
        EventPipeline._prepare_then_sync(broken, lambda: synced.append(True))
    assert synced == [True]

    borrowed = _Borrowed()

    def lost() -> None:
        raise EventNotRecorded("its first audit record could not be written")

    with pytest.raises(EventNotRecorded):
        EventPipeline._prepare_then_sync(
            lambda: Prepared(None, {}, borrowed),  # type: ignore[arg-type]
            lost,
        )
    assert borrowed.closed == 1
