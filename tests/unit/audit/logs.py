"""Real audit logs for the reading commands' tests, written through AuditWriter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cloudrunner.audit import AuditWriter

START = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


class StepClock:
    """One second per record from START, so time filters have fixed answers."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        moment = self.now
        self.now += timedelta(seconds=1)
        return moment


def hook(
    event: str, source: str, command: str, outcome: str, ms: float, **more: Any
) -> dict[str, Any]:
    return {
        "event": event, "source": source, "command": command, "outcome": outcome,
        "duration_ms": ms, "conversation_id": more.pop("conversation", "c1"),
        "session": more.pop("session", "c1"), **more,
    }  # fmt: skip


def decision(event: str, answer: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "event": event, "decision": answer, "conversation_id": more.pop("conversation", "c1"),
        "session": more.pop("session", "c1"), **more,
    }  # fmt: skip


def sample_records() -> list[tuple[str, dict[str, Any]]]:
    """A small session: 3 shell events (one denied), a prompt, a stop; 12 records."""
    guard = ".cursor/hooks/guard.sh"
    audit = "/etc/cursor/audit.sh"
    return [
        ("hook", hook("beforeShellExecution", "enterprise", audit, "ok", 10.0)),
        ("hook", hook("beforeShellExecution", "project", guard, "ok", 20.0)),
        ("decision", decision("beforeShellExecution", {"permission": "allow"},
                              payload={"command": "ls"})),
        ("hook", hook("beforeShellExecution", "enterprise", audit, "ok", 30.0)),
        ("hook", hook("beforeShellExecution", "project", guard, "blocked", 40.0)),
        ("decision", decision("beforeShellExecution", {"permission": "deny"},
                              payload={"command": "rm -rf /"})),
        ("hook", hook("beforeShellExecution", "enterprise", audit, "timeout", 1000.0,
                      conversation="c2", session="c2")),
        ("hook", hook("beforeShellExecution", "project", guard, "blocked", 50.0,
                      conversation="c2", session="c2")),
        ("decision", decision("beforeShellExecution", {"permission": "deny"},
                              payload={"command": "rm -rf /"}, conversation="c2", session="c2")),
        ("gated", decision("beforeSubmitPrompt", {"continue": True}, reason="gate closed")),
        ("hook", hook("stop", "project", ".cursor/hooks/open-todos.sh", "error", 5.0)),
        ("decision", decision("stop", {"followup_message": "finish TODO.md"})),
    ]  # fmt: skip


def write_log(path: Path, records: list[tuple[str, dict[str, Any]]], **options: Any) -> None:
    with AuditWriter(path, worker="w", fsync="never", clock=StepClock(), **options) as writer:
        for kind, fields in records:
            writer.append(kind, fields)
