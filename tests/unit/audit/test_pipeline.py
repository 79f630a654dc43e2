"""The structlog processor pipeline, asserted on as dicts with LogCapture."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import LogCapture

from cloudrunner.audit.chain import GENESIS_HASH, record_hash
from cloudrunner.audit.digest import digest_text
from cloudrunner.audit.pipeline import (
    ChainHead,
    chain_processor,
    record_processors,
    render_line,
)
from cloudrunner.audit.redaction import REDACTED
from cloudrunner.protocol.outcomes import Outcome

FIXED = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def run(fields: dict[str, Any], **options: Any) -> dict[str, Any]:
    capture = LogCapture()
    logger = structlog.wrap_logger(
        None,
        processors=[*record_processors(clock=lambda: FIXED, **options), capture],
        wrapper_class=structlog.BoundLogger,
    )
    logger.msg(**fields)
    (entry,) = capture.entries
    return dict(entry)


def test_time_worker_and_pid_are_stamped() -> None:
    entry = run({"kind": "hook"}, worker="w-7")
    assert entry["time"] == "2025-01-02T03:04:05.678901Z"
    assert entry["worker"] == "w-7"
    assert entry["pid"] == os.getpid()


def test_a_time_given_by_the_runner_is_kept_and_normalised_to_utc() -> None:
    started = datetime(2025, 1, 2, 5, 0, 0, tzinfo=timezone(timedelta(hours=2)))
    assert run({"kind": "hook", "time": started})["time"] == "2025-01-02T03:00:00.000000Z"


def test_values_become_plain_json() -> None:
    entry = run(
        {"kind": "hook", "outcome": Outcome.BLOCKED, "source_file": Path("/r/.cursor/hooks.json")}
        | {"limits": {"cpus": 0.5, "pids": 64}, "tags": ("a", "b"), "ids": {3, 1, 2}}
    )
    assert entry["outcome"] == "blocked" and type(entry["outcome"]) is str
    assert entry["source_file"] == "/r/.cursor/hooks.json"
    assert entry["tags"] == ["a", "b"]
    assert entry["ids"] == [1, 2, 3]


def test_a_value_json_cannot_hold_is_an_error_naming_the_field() -> None:
    with pytest.raises(TypeError, match=r"limits\.when"):
        run({"kind": "hook", "limits": {"when": object()}})
    with pytest.raises(ValueError, match="duration_ms"):
        run({"kind": "hook", "duration_ms": float("nan")})


def test_payload_text_is_stored_as_sha256_and_length() -> None:
    payload = {
        "hook_event_name": "beforeSubmitPrompt",
        "prompt": "please deploy",
        "attachments": [{"type": "file", "file_path": "a.py"}],
        "nested": {"tool_output": "lots of output"},
    }
    entry = run({"kind": "hook", "payload": payload})
    assert entry["payload"]["prompt"] == digest_text("please deploy")
    assert entry["payload"]["nested"]["tool_output"] == digest_text("lots of output")
    assert entry["payload"]["attachments"] == [{"type": "file", "file_path": "a.py"}]
    assert entry["payload"]["hook_event_name"] == "beforeSubmitPrompt"


def test_payload_text_is_kept_when_the_operator_opts_in_but_still_redacted() -> None:
    entry = run(
        {"kind": "hook", "payload": {"prompt": "use password=hunter2"}}, include_payload_text=True
    )
    assert entry["payload"]["prompt"] == f"use password={REDACTED}"


def test_digest_is_of_the_text_the_agent_really_sent() -> None:
    entry = run({"kind": "hook", "payload": {"content": "token=abc"}})
    assert entry["payload"]["content"] == digest_text("token=abc")


def test_every_string_is_redacted_at_any_depth() -> None:
    entry = run(
        {
            "kind": "hook",
            "command": "deploy --token abc123",
            "limits": {"env": ["AWS_SECRET_ACCESS_KEY=xyz"]},
        }
    )
    assert entry["command"] == f"deploy --token {REDACTED}"
    assert entry["limits"]["env"] == [f"AWS_SECRET_ACCESS_KEY={REDACTED}"]


def test_chain_processor_links_to_the_head_and_hashes_the_record() -> None:
    head = ChainHead(seq=4, hash="a" * 64)
    capture = LogCapture()
    logger = structlog.wrap_logger(
        None,
        processors=[*record_processors(clock=lambda: FIXED), chain_processor(head), capture],
        wrapper_class=structlog.BoundLogger,
    )
    logger.msg(kind="hook")
    (entry,) = capture.entries
    assert entry["seq"] == 5
    assert entry["prev_hash"] == "a" * 64
    # LogCapture adds log_level after the chain ran; the hash covers what the chain saw.
    entry.pop("log_level")
    assert entry["hash"] == record_hash(entry)


def test_render_line_gives_one_ascii_line_and_the_record() -> None:
    head = ChainHead(seq=-1, hash=GENESIS_HASH)
    event = chain_processor(head)(None, "audit", {"kind": "hook", "note": "é"})
    assert isinstance(event, dict)
    (line, record), kwargs = render_line(None, "audit", event)
    assert kwargs == {}
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert line.isascii()
    assert record["seq"] == 0
