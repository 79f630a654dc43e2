"""Record size bounds (cloudrunner/audit/bounds.py and the pipeline's clean step)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cloudrunner.audit.bounds import ID_CAP, TEXT_CAP, bounded, cap_for
from cloudrunner.audit.chain import canonical_json
from cloudrunner.audit.processors import clean_record
from cloudrunner.audit.redaction import REDACTED


def test_a_short_text_is_only_redacted() -> None:
    assert bounded("ls -la", 10) == "ls -la"
    assert bounded("password=x", 100) == f"password={REDACTED}"


def test_a_long_text_keeps_its_head_and_the_digest_of_the_whole() -> None:
    text = "é" * 50 + "x" * 500
    out = bounded(text, 100)
    whole = text.encode()
    assert out.startswith("é" * 50 + "x" * 50 + "…[cut: ")
    assert out.endswith(f"[cut: {len(whole)} bytes, sha256 {hashlib.sha256(whole).hexdigest()}]")
    assert bounded(out, 100) == out  # cutting again changes nothing


def test_a_forged_cut_mark_does_not_skip_redaction() -> None:
    forged = "password=hunter2 " + "x" * 80 + "…[cut: 9 bytes, sha256 " + "0" * 64 + "]"
    out = bounded(forged, 100)
    assert "hunter2" not in out and out.endswith("0" * 64 + "]")


def test_a_secret_straddling_the_cut_is_redacted_before_the_cut() -> None:
    text = "x" * 90 + " GITHUB_TOKEN=ghp_" + "A1b2C3d4E5" * 4 + " " + "y" * 500
    out = bounded(text, 100)
    assert "ghp_" not in out and "A1b2" not in out


def test_caps_by_field() -> None:
    assert cap_for("payload") is None
    assert cap_for("stdout_excerpt") is None and cap_for("stderr_excerpt") is None
    assert cap_for("conversation_id") == ID_CAP and cap_for("session") == ID_CAP
    assert cap_for("command") == TEXT_CAP and cap_for("decision") == TEXT_CAP


def _event_records(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of one event as the worker builds them: ids copied into each, the
    matcher's subject quoted in the match reason, the payload in the decision only."""
    ids = {
        "conversation_id": payload.get("conversation_id", ""),
        "generation_id": payload.get("generation_id", ""),
        "event": "beforeShellExecution",
    }
    subject = payload.get("command", "")
    hook = {
        **ids, "kind": "hook", "session": ids["conversation_id"], "command": "guard.sh",
        "match_reason": f"matcher 'rm' matched {subject!r}", "reason": f"saw {subject}",
        "decision": {"permission": "deny", "user_message": f"refused: {subject}"},
        "stdout_excerpt": "", "stderr_excerpt": "",
    }  # fmt: skip
    decision = {
        **ids, "kind": "decision", "session": ids["conversation_id"], "payload": payload,
        "decision": {"permission": "deny", "user_message": f"refused: {subject}"},
    }  # fmt: skip
    return [hook, dict(hook), decision]


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 300_000),
    st.integers(0, 300_000),
    st.sampled_from(["x", "é", "\u2028", "a=b ", '"']),
)
def test_an_events_records_stay_within_a_fixed_multiple_of_its_payload(
    command: int, conversation: int, char: str
) -> None:
    payload = {
        "hook_event_name": "beforeShellExecution",
        "conversation_id": "c" * conversation,
        "generation_id": "g1",
        "command": "rm " + char * command,
        "cwd": "/w",
    }
    payload_bytes = len(json.dumps(payload, ensure_ascii=False).encode())
    written = sum(
        len(canonical_json(clean_record(r, include_payload_text=False, bounded=True)))
        for r in _event_records(payload)
    )
    # The payload once, \u-escaped at worst (6 bytes per UTF-8 byte), plus the capped
    # fields: per hook record match_reason, reason and the answer's message, per decision
    # the message, and three ids each, at most 12 bytes a character (an escaped surrogate
    # pair), with their cut marks. Without the bound the subject was copied 8 times.
    capped_chars = 2 * (3 * TEXT_CAP + 3 * ID_CAP) + (TEXT_CAP + 3 * ID_CAP)
    assert written <= 6 * payload_bytes + 12 * capped_chars + 8192


def test_a_long_conversation_id_is_stored_once_in_full() -> None:
    conversation = "c" * 100_000
    records = _event_records(
        {"conversation_id": conversation, "command": "ls", "hook_event_name": "x"}
    )
    lines = [
        canonical_json(clean_record(r, include_payload_text=False, bounded=True)) for r in records
    ]
    assert sum(line.count(conversation) for line in lines) == 1
    hook = json.loads(lines[0])
    assert hook["conversation_id"].startswith("c" * ID_CAP + "…[cut: 100000 bytes, sha256 ")
    assert hook["session"] == hook["conversation_id"]


def test_without_bounds_nothing_is_cut() -> None:
    fields = {"command": "x" * (TEXT_CAP * 2)}
    assert clean_record(fields, include_payload_text=False)["command"] == fields["command"]
