"""Event streams: recorded and hand-written, JSON lines and TOML, and every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudrunner.replay import StreamError, append_entry, load_stream, rewrite_stream


def write(path: Path, *lines: object) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_hand_written_jsonl_stream_loads_with_subset_matching(tmp_path: Path) -> None:
    stream = load_stream(
        write(
            tmp_path / "s.jsonl",
            {"event": "beforeShellExecution", "payload": {"command": "ls"},
             "expected": {"permission": "allow"}, "name": "ls is fine"},
            {"payload": {"hook_event_name": "stop"}},
        )
    )  # fmt: skip
    first, second = stream.events
    assert (first.event, first.match, first.name, first.recorded) == (
        "beforeShellExecution", "subset", "ls is fine", False,
    )  # fmt: skip
    assert first.where == f"{tmp_path / 's.jsonl'}:1"
    assert second.event == "stop" and second.expected is None
    assert stream.commits() == []


def test_a_toml_stream_loads(tmp_path: Path) -> None:
    path = tmp_path / "hooks.toml"
    path.write_text(
        'conversation_id = "t"\n[[events]]\nevent = "stop"\nexpected = {}\n'
        '[[events]]\nevent = "beforeReadFile"\nmatch = "exact"\n'
        'payload = { file_path = "{workspace}/x" }\n'
    )
    stream = load_stream(path)
    assert stream.format == "toml" and stream.conversation_id == "t"
    assert [e.event for e in stream.events] == ["stop", "beforeReadFile"]
    assert stream.events[1].match == "exact" and stream.events[1].where == f"{path}: event 2"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"event": "beforeShellExecutio"}, "unknown hook event 'beforeShellExecutio'"),
        ({"event": "stop", "expect": {}}, "unknown key 'expect' (did you mean 'expected'?)"),
        ({"event": "stop", "payload": []}, "payload must be an object"),
        ({"event": "stop", "expected": "deny"}, "expected must be an object"),
        ({"payload": {}}, "the entry names no event"),
        ({"event": "stop", "payload": {"hook_event_name": "preCompact"}}, "make them agree"),
        ({"event": "stop", "match": "fuzzy"}, "match must be 'exact' or 'subset'"),
        ({"event": "stop", "stream": 7}, "stream format 7 is not one this cloudrunner reads"),
        (["stop"], "an event entry must be an object, not list"),
    ],
)
def test_a_bad_entry_is_named_by_file_and_line(tmp_path: Path, line: object, message: str) -> None:
    path = write(tmp_path / "s.jsonl", {"event": "stop"}, line)
    with pytest.raises(StreamError) as caught:
        load_stream(path)
    assert caught.value.message.startswith(f"{path}:2: ")
    assert message in caught.value.message


def test_a_cut_last_line_says_it_looks_like_an_interrupted_recording(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"event": "stop"}) + '\n{"event": "st')
    with pytest.raises(StreamError, match=r"s\.jsonl:2: not a JSON object \(cut short"):
        load_stream(path)


def test_unusable_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(StreamError, match="does not exist; record one with"):
        load_stream(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(StreamError, match="holds no events"):
        load_stream(tmp_path / "empty.jsonl")
    (tmp_path / "bad.toml").write_text("[[events]\n")
    with pytest.raises(StreamError, match=r"bad\.toml: not valid TOML"):
        load_stream(tmp_path / "bad.toml")
    (tmp_path / "top.toml").write_text("tests = 1\n")
    with pytest.raises(StreamError, match="unknown top-level key 'tests'"):
        load_stream(tmp_path / "top.toml")


def test_append_terminates_a_cut_entry_and_rewrite_keeps_the_format(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_text('{"event": "st')
    append_entry(path, {"stream": 1, "event": "stop", "expected": {}}, sync=False)
    assert path.read_text().splitlines() == [
        '{"event": "st',
        '{"event":"stop","expected":{},"stream":1}',
    ]
    toml = tmp_path / "t.toml"
    toml.write_text('conversation_id = "c"\n[[events]]\nevent = "stop"\n')
    stream = load_stream(toml)
    stream.events[0].data["expected"] = {"followup_message": "again"}
    rewrite_stream(stream)
    again = load_stream(toml)
    assert again.conversation_id == "c"
    assert again.events[0].expected == {"followup_message": "again"}
