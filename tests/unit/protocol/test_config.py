from __future__ import annotations

import json

import pytest

from cloudrunner.protocol.config import DEFAULT_LOOP_LIMIT, ParseResult, parse_hooks_file
from cloudrunner.protocol.diagnostics import Severity


def parse(text: str | bytes) -> ParseResult:
    data = text.encode() if isinstance(text, str) else text
    return parse_hooks_file(data, file="hooks.json")


def codes(result: ParseResult, severity: Severity | None = None) -> list[str]:
    return [d.code for d in result.diagnostics if severity is None or d.severity is severity]


def one(result: ParseResult, code: str):  # type: ignore[no-untyped-def]
    found = [d for d in result.diagnostics if d.code == code]
    assert len(found) == 1, result.diagnostics
    return found[0]


def test_full_definition_keeps_every_key_and_type() -> None:
    result = parse(
        json.dumps(
            {
                "version": 1,
                "hooks": {
                    "stop": [
                        {
                            "command": ".cursor/hooks/s.sh",
                            "type": "command",
                            "timeout": 2.5,
                            "matcher": "Stop",
                            "loop_limit": None,
                            "failClosed": False,
                        }
                    ],
                    "beforeShellExecution": [
                        {"type": "prompt", "prompt": "safe?", "model": "fast", "timeout": 10}
                    ],
                },
            }
        )
    )
    assert result.diagnostics == ()
    assert result.config is not None
    stop = result.config.hooks["stop"][0].definition
    assert (stop.command, stop.timeout, stop.matcher, stop.loop_limit) == (
        ".cursor/hooks/s.sh",
        2.5,
        "Stop",
        None,
    )
    prompt = result.config.hooks["beforeShellExecution"][0].definition
    assert (prompt.type, prompt.prompt, prompt.model, prompt.command) == (
        "prompt",
        "safe?",
        "fast",
        None,
    )


def test_defaults() -> None:
    result = parse('{"hooks": {"stop": [{"command": "x"}]}}')
    assert result.config is not None
    assert result.config.version == 1
    d = result.config.hooks["stop"][0].definition
    assert d.type == "command"
    assert d.timeout is None  # the worker's default applies
    assert d.matcher is None
    assert d.loop_limit == DEFAULT_LOOP_LIMIT == 5
    assert d.fail_closed is False


def test_syntax_error_has_line_and_column_and_comment_hint() -> None:
    result = parse('{\n  "hooks": {\n    // a comment\n  }\n}')
    assert result.config is None
    d = one(result, "json-syntax")
    assert (d.line, d.column) == (3, 5)
    assert "comments are not allowed" in d.message
    assert d.location() == "hooks.json:3:5"


def test_trailing_comma_hint() -> None:
    d = one(parse('{"hooks": {"stop": [{"command": "x"},]}}'), "json-syntax")
    assert "trailing comma" in d.message
    assert (d.line, d.column) == (1, 38)


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", "empty-file"),
        (b"  \n", "empty-file"),
        (b'{"hooks": {"stop": [{"command": "\xff"}]}}', "not-utf8"),
        (b"[1, 2]", "not-an-object"),
        (b'"text"', "not-an-object"),
        (b'{"hooks": {"stop": [{"command": "x", "timeout": NaN}]}}', "json-syntax"),
        (b"[" * 100_000 + b"]" * 100_000, "too-deep"),
    ],
)
def test_unusable_documents(data: bytes, code: str) -> None:
    result = parse(data)
    assert result.config is None
    assert codes(result, Severity.ERROR) == [code]


def test_byte_order_mark_is_accepted() -> None:
    result = parse(b'\xef\xbb\xbf{"hooks": {}}')
    assert result.config is not None
    assert result.errors == ()


@pytest.mark.parametrize(
    ("hook", "pointer", "words"),
    [
        ({"command": 3}, "/hooks/stop/0/command", "`command` must be a string"),
        ({"command": "x", "type": "llm"}, "/hooks/stop/0/type", '"command" or "prompt"'),
        ({"command": "x", "timeout": "10s"}, "/hooks/stop/0/timeout", "positive number"),
        ({"command": "x", "timeout": True}, "/hooks/stop/0/timeout", "boolean true"),
        ({"command": "x", "timeout": 0}, "/hooks/stop/0/timeout", "positive number"),
        ({"command": "x", "timeout": -1}, "/hooks/stop/0/timeout", "positive number"),
        ({"command": "x", "matcher": {"extensions": ["py"]}}, "/hooks/stop/0/matcher", "object"),
        ({"command": "x", "loop_limit": -1}, "/hooks/stop/0/loop_limit", "non-negative"),
        ({"command": "x", "loop_limit": 2.5}, "/hooks/stop/0/loop_limit", "integer"),
        ({"command": "x", "failClosed": "yes"}, "/hooks/stop/0/failClosed", "true or false"),
        ({"command": "x", "failClosed": None}, "/hooks/stop/0/failClosed", "null"),
        ({"type": "prompt", "prompt": 1}, "/hooks/stop/0/prompt", "a string"),
    ],
)
def test_wrong_types_are_errors_with_pointer_and_position(
    hook: dict[str, object], pointer: str, words: str
) -> None:
    text = json.dumps({"version": 1, "hooks": {"stop": [hook]}}, indent=2)
    result = parse(text)
    assert result.config is None  # a wrong type disables the whole file
    d = one(result, "wrong-type")
    assert d.severity is Severity.ERROR
    assert d.pointer == pointer
    assert words in d.message
    assert d.line is not None and d.column is not None
    field = pointer.rsplit("/", 1)[1]
    line_text = text.splitlines()[d.line - 1]
    # the position is the value's: right after `"field": `
    assert line_text[: d.column - 1].rstrip().endswith(f'"{field}":')


def test_event_value_object_is_an_error_with_a_fix() -> None:
    result = parse('{"hooks": {"stop": {"command": "x"}}}')
    assert result.config is None
    d = one(result, "wrong-type")
    assert d.pointer == "/hooks/stop"
    assert "wrap the single hook in an array" in d.message


@pytest.mark.parametrize(
    ("document", "code", "pointer"),
    [
        ({"hooks": []}, "wrong-type", "/hooks"),
        ({"version": "1", "hooks": {}}, "wrong-type", "/version"),
        ({"hooks": {"stop": ["x.sh"]}}, "wrong-type", "/hooks/stop/0"),
        ({"hooks": {"stop": [{"timeout": 5}]}}, "missing-command", "/hooks/stop/0"),
        ({"hooks": {"stop": [{"command": "  "}]}}, "empty-command", "/hooks/stop/0/command"),
        ({"hooks": {"stop": [{"type": "prompt"}]}}, "missing-prompt", "/hooks/stop/0"),
    ],
)
def test_structural_errors(document: object, code: str, pointer: str) -> None:
    result = parse(json.dumps(document))
    assert result.config is None
    assert one(result, code).pointer == pointer


def test_claude_nested_form_is_explained() -> None:
    doc = {"hooks": {"stop": [{"matcher": "*", "hooks": [{"type": "command", "command": "x"}]}]}}
    result = parse(json.dumps(doc))
    assert result.config is None
    assert "nested" in one(result, "missing-command").message
    assert "Claude Code" in one(result, "unknown-key").message


def test_unknown_keys_and_events_are_warnings() -> None:
    doc = {
        "version": 1,
        "$schema": "https://example.invalid/schema.json",
        "_comment": "mine",
        "hooks": {
            "stop": [{"command": "x", "timeoutSec": 5, "description": "d"}],
            "PostToolUse": [{"command": "y"}],
            "preToolUse:Write": [{"command": "z"}],
            "futureEvent": [{"anything": True}],
        },
    }
    result = parse(json.dumps(doc, indent=1))
    assert result.errors == ()
    assert result.config is not None
    assert set(result.config.hooks) == {"stop"}  # unknown events' hooks are ignored
    warnings = {d.pointer: d for d in result.diagnostics if d.severity is Severity.WARNING}
    assert set(warnings) == {
        "/_comment",
        "/hooks/stop/0/timeoutSec",
        "/hooks/stop/0/description",
        "/hooks/PostToolUse",
        "/hooks/preToolUse:Write",
        "/hooks/futureEvent",
    }
    assert "in seconds" in warnings["/hooks/stop/0/timeoutSec"].message
    assert "'postToolUse'" in warnings["/hooks/PostToolUse"].message
    assert "matcher" in warnings["/hooks/preToolUse:Write"].message
    assert warnings["/hooks/futureEvent"].code == "unknown-event"
    # unknown keys point at the key itself
    assert warnings["/_comment"].line == 4 and warnings["/_comment"].column == 2


def test_version_other_than_1_is_a_warning() -> None:
    result = parse('{"version": 2, "hooks": {}}')
    assert result.config is not None
    assert codes(result) == ["unknown-version"]


def test_missing_hooks_and_top_level_events_warn() -> None:
    result = parse('{"version": 1, "stop": [{"command": "x"}]}')
    assert result.config is not None and result.config.hooks == {}
    assert sorted(codes(result)) == ["event-at-top-level", "no-hooks"]


def test_invalid_matcher_is_an_error_of_that_hook_only() -> None:
    doc = {
        "hooks": {
            "beforeShellExecution": [
                {"command": "guard", "matcher": "(", "failClosed": True},
                {"command": "other"},
            ]
        }
    }
    result = parse(json.dumps(doc))
    assert result.config is not None  # the file still loads
    d = one(result, "invalid-matcher")
    assert d.severity is Severity.ERROR
    assert d.pointer == "/hooks/beforeShellExecution/0/matcher"
    assert "blocks every beforeShellExecution event" in d.message
    entries = result.config.hooks["beforeShellExecution"]
    assert [e.matcher.valid for e in entries] == [False, True]


@pytest.mark.parametrize(
    ("event", "hook", "code"),
    [
        ("preToolUse", {"command": "x", "loop_limit": 3}, "loop-limit-ignored"),
        ("afterFileEdit", {"command": "x", "failClosed": True}, "fail-closed-ignored"),
        ("sessionStart", {"command": "x", "matcher": "foo"}, "matcher-ignored"),
        ("stop", {"command": "x", "timeout": 10000}, "long-timeout"),
        ("stop", {"command": "x", "prompt": "p"}, "ignored-key"),
        ("stop", {"type": "prompt", "prompt": "p", "command": "x"}, "ignored-key"),
    ],
)
def test_suspicious_but_usable_keys_warn(event: str, hook: dict[str, object], code: str) -> None:
    result = parse(json.dumps({"hooks": {event: [hook]}}))
    assert result.config is not None
    assert codes(result) == [code]


def test_matcher_star_and_empty_on_non_matcher_events_do_not_warn() -> None:
    doc = {
        "hooks": {
            "sessionStart": [{"command": "a", "matcher": "*"}, {"command": "b", "matcher": ""}]
        }
    }
    assert parse(json.dumps(doc)).diagnostics == ()


def test_duplicate_keys_warn_with_position() -> None:
    result = parse('{"hooks": {"stop": [{"command": "a",\n "command": "b"}]}}')
    assert result.config is not None
    assert result.config.hooks["stop"][0].definition.command == "b"
    d = one(result, "duplicate-key")
    assert (d.pointer, d.line, d.column) == ("/hooks/stop/0/command", 2, 2)


def test_entries_keep_file_order_and_identity() -> None:
    doc = {"hooks": {"stop": [{"command": "a"}, {"command": "b"}, {"command": "a"}]}}
    result = parse(json.dumps(doc))
    assert result.config is not None
    entries = result.config.hooks["stop"]
    assert [e.index for e in entries] == [0, 1, 2]
    assert entries[0].canonical == entries[2].canonical != entries[1].canonical
