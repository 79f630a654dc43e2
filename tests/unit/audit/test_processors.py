"""The structlog processor pipeline, asserted on as dicts with LogCapture."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import LogCapture

from cloudrunner.audit.chain import GENESIS_HASH, canonical_json, record_hash
from cloudrunner.audit.digest import digest_text
from cloudrunner.audit.processors import (
    ChainHead,
    Cleaned,
    chain_and_render,
    chain_processor,
    clean_record,
    clean_value,
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


_json_keys = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x2FF), max_size=8
).filter(lambda k: k not in ("hash", "seq", "prev_hash"))
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_json_keys, inner, max_size=3),
    max_leaves=12,
)


@given(fields=st.dictionaries(_json_keys, _json_values, max_size=8))
@settings(max_examples=300, deadline=None)
def test_chain_and_render_serialises_once_what_the_two_steps_gave(
    fields: dict[str, Any],
) -> None:
    """Every key order around `hash` (keys before it, after it, none on a side)."""
    one = chain_processor(ChainHead(seq=2, hash="b" * 64))(None, "audit", dict(fields))
    (expected, _), _ = render_line(None, "audit", one)
    (line, record), kwargs = chain_and_render(ChainHead(seq=2, hash="b" * 64))(
        None, "audit", dict(fields)
    )
    assert kwargs == {}
    assert line == expected
    assert record == one and record["hash"] == record_hash(record)


def test_a_cleaned_value_is_stored_as_it_was_cleaned() -> None:
    attestation = {"env": ["TOKEN=ghp_" + "a" * 36], "image": "x", "nested": {"password": "p"}}
    cleaned = clean_value("attestation", attestation, include_payload_text=False)
    direct = clean_record({"attestation": attestation}, include_payload_text=False, bounded=True)
    assert isinstance(cleaned, Cleaned)
    assert cleaned.value == direct["attestation"]
    assert "ghp_" not in canonical_json(cleaned.value)  # redacted once, for every record
    stored = clean_record({"attestation": cleaned, "n": 1}, include_payload_text=False)
    assert stored == {"attestation": direct["attestation"], "n": 1}


# -- the clean step walks once; it must give what the three walks gave ------------------


def _three_walks(fields: dict[str, Any], *, include_payload_text: bool) -> dict[str, Any]:
    """The reference: plain JSON values, then payload text digested, then secrets redacted
    (`redact_value` below the top-level names), each over the whole record (how the
    pipeline did it before one walk)."""
    from cloudrunner.audit.digest import PAYLOAD_TEXT_KEYS, digest_value
    from cloudrunner.audit.processors import json_value
    from cloudrunner.audit.redaction import redact_value

    def digested(value: Any) -> Any:
        if type(value) is dict:
            return {
                k: dict(digest_value(v)) if k in PAYLOAD_TEXT_KEYS else digested(v)
                for k, v in value.items()
            }
        if type(value) is list:
            return [digested(v) for v in value]
        return value

    plain = {key: json_value(value, key) for key, value in fields.items()}
    if not include_payload_text:
        plain = digested(plain)
    return {key: redact_value(value) for key, value in plain.items()}


_KEYS = st.sampled_from(
    ["prompt", "text", "edits", "command", "env", "password", "a", "b", "name", "value"]
)
_SECRET_LEAVES = [
    "AKIAABCDEFGHIJKLMNOP", "Bearer abcdefgh12345678", "password=hunter2hunter2", "plain",
    "DB_PASSWORD", "--api-key",
]  # fmt: skip
_SECRETS = st.sampled_from(_SECRET_LEAVES)
_LEAVES = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12) | _SECRETS | st.sampled_from([Outcome.OK, Path("/r/x")])
)  # fmt: skip
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_KEYS | st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=5), st.booleans())
def test_one_walk_gives_what_the_three_walks_gave(
    fields: dict[str, Any], include_payload_text: bool
) -> None:
    from cloudrunner.audit.processors import clean_record

    got = clean_record(fields, include_payload_text=include_payload_text)
    want = _three_walks(fields, include_payload_text=include_payload_text)
    assert canonical_json(got) == canonical_json(want)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"limits": {"x": [1, {2: "a"}]}}, "audit field limits.x[1] has a non-string key 2"),
        ({"a": [0.5, float("nan")]}, "audit field a[1] is nan, which JSON cannot hold"),
        ({"b": {"c": object()}}, "audit field b.c holds a object, which is not JSON data"),
    ],
)
def test_the_clean_step_names_the_field_it_cannot_store(
    fields: dict[str, Any], message: str
) -> None:
    from cloudrunner.audit.processors import clean_record

    with pytest.raises((TypeError, ValueError)) as caught:
        clean_record(fields, include_payload_text=False)
    assert str(caught.value) == message
    with pytest.raises(type(caught.value), match="^" + message.replace("[", r"\[")):
        _three_walks(fields, include_payload_text=False)


def test_secret_keys_are_blanked_in_the_payload_and_tool_input() -> None:
    entry = run(
        {
            "kind": "decision",
            "payload": {
                "tool_input": {
                    "password": "p4ss",
                    "env": {"DB_PASSWORD": "p5ss", "MODE": "prod"},
                    "headers": {"Authorization": "Basic dXNlcjpwYXNz"},
                    "api_key": "k3y",
                    "env_list": [{"name": "GITHUB_TOKEN", "value": "t0k"}],
                    "argv": ["--token", "t1k"],
                },
                "session_id": "s-1",
                "context_tokens": 4000,
            },
        }
    )
    tool_input = entry["payload"]["tool_input"]
    assert tool_input == {
        "password": REDACTED,
        "env": {"DB_PASSWORD": REDACTED, "MODE": "prod"},
        "headers": {"Authorization": REDACTED},
        "api_key": REDACTED,
        "env_list": [{"name": "GITHUB_TOKEN", "value": REDACTED}],
        "argv": ["--token", REDACTED],
    }
    # protocol fields that merely look alike are kept
    assert entry["payload"]["session_id"] == "s-1"
    assert entry["payload"]["context_tokens"] == 4000


def test_the_writers_pipeline_bounds_every_field_but_the_payload() -> None:
    long_id = "c" * 10_000
    entry = run({"kind": "decision", "conversation_id": long_id, "payload": {"x": long_id}})
    assert entry["payload"]["x"] == long_id
    assert len(entry["conversation_id"]) < 400
    assert "sha256" in entry["conversation_id"]
