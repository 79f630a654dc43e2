"""Recording stream entries from the worker's audit records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cloudrunner.audit import REDACTED, RecordKind
from cloudrunner.replay import load_stream
from cloudrunner.replay.recording import build_entry, changed_pointers, record_event
from cloudrunner.settings import load_settings


def records(payload: dict[str, Any]) -> list[tuple[RecordKind, dict[str, Any]]]:
    hook = {
        "event": "beforeSubmitPrompt", "source": "enterprise", "source_file": "/e/hooks.json",
        "source_hash": "a" * 64, "hook_index": 0, "command": "python3 hooks/no-secrets.py",
        "matched": True, "outcome": "blocked", "exit_code": 2, "merge_use": "decided: deny",
        "image_digest": "sha256:" + "b" * 64, "stdout_excerpt": "not kept",
    }  # fmt: skip
    decision = {
        "event": "beforeSubmitPrompt", "conversation_id": "c1", "payload": payload,
        "decision": {"continue": False, "user_message": "no"}, "commit": "c" * 40,
        "workspace": "/src/app", "blocked_by": "enterprise:/e/hooks.json#/hooks/x/0",
    }  # fmt: skip
    return [(RecordKind.HOOK, hook), (RecordKind.DECISION, decision)]


def settings(tmp_path: Path, **audit: object) -> Any:
    overrides = {f"audit.{k}": v for k, v in audit.items()}
    return load_settings(None, environ={}, overrides={"state_dir": tmp_path, **overrides})


def test_an_entry_keeps_payload_answer_commit_hooks_and_digests(tmp_path: Path) -> None:
    payload = {"hook_event_name": "beforeSubmitPrompt", "prompt": "use AKIAABCDEFGHIJKLMNOP now"}
    entry = build_entry(settings(tmp_path), records(payload))
    assert entry is not None
    assert entry["stream"] == 1 and entry["match"] == "exact"
    assert entry["expected"] == {"continue": False, "user_message": "no"}
    assert entry["commit"] == "c" * 40 and entry["workspace"] == "/src/app"
    assert entry["payload"]["prompt"] == f"use {REDACTED} now"
    assert entry["altered"] == ["/prompt"]
    (hook,) = entry["hooks"]
    assert hook["outcome"] == "blocked" and "stdout_excerpt" not in hook
    assert entry["image_digests"] == ["sha256:" + "b" * 64]
    assert entry["sources"] == [
        {"source": "enterprise", "file": "/e/hooks.json", "sha256": "a" * 64}
    ]


def test_without_payload_text_the_recording_digests_like_the_audit_log(tmp_path: Path) -> None:
    entry = build_entry(
        settings(tmp_path, record_payload_text=False), records({"prompt": "Add a test"})
    )
    assert entry is not None
    assert set(entry["payload"]["prompt"]) == {"sha256", "length"}
    assert entry["payload_text"] is False and entry["altered"] == ["/prompt"]


def test_record_event_appends_only_when_a_path_is_set(tmp_path: Path) -> None:
    record_event(settings(tmp_path), records({"prompt": "x"}))
    assert list(tmp_path.iterdir()) == []
    stream = tmp_path / "rec.jsonl"
    for _ in range(2):
        record_event(settings(tmp_path, record_path=stream), records({"prompt": "x"}))
    loaded = load_stream(stream)
    assert [e.recorded for e in loaded.events] == [True, True]
    assert loaded.commits() == ["c" * 40]


def test_changed_pointers_name_the_outermost_change() -> None:
    before = {"a": {"b": "x", "c": [1, 2]}, "d/e": "y"}
    after = {"a": {"b": "x", "c": [1, 3]}, "d/e": {"sha256": "..."}}
    assert changed_pointers(before, after) == ["/a/c/1", "/d~1e"]
    assert changed_pointers(before, before) == []


def test_an_entry_redacts_secret_keys_and_lists_them_as_altered(tmp_path: Path) -> None:
    payload = {
        "hook_event_name": "preToolUse",
        "tool_name": "Shell",
        "tool_input": {"command": "make", "env": {"NPM_TOKEN": "n1"}, "password": "p1"},
        "session_id": "s-1",
    }
    entry = build_entry(settings(tmp_path), records(payload))
    assert entry is not None
    assert entry["payload"]["tool_input"] == {
        "command": "make",
        "env": {"NPM_TOKEN": REDACTED},
        "password": REDACTED,
    }
    assert entry["payload"]["session_id"] == "s-1"
    assert entry["altered"] == ["/tool_input/env/NPM_TOKEN", "/tool_input/password"]


def test_an_entry_keeps_long_payload_values_whole(tmp_path: Path) -> None:
    # the stream is what replay runs: it is redacted, never cut
    payload = {"hook_event_name": "beforeSubmitPrompt", "conversation_id": "c" * 5000}
    entry = build_entry(settings(tmp_path), records(payload))
    assert entry is not None
    assert entry["payload"]["conversation_id"] == "c" * 5000
