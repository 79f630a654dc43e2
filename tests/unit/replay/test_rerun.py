"""The pure parts of replay: comparing answers and hooks, payloads in the new workspace."""

from __future__ import annotations

import json
from pathlib import Path

from cloudrunner.replay import differences, hook_changes, load_stream, replay_payload


def test_differences_exact_and_subset() -> None:
    expected = {"permission": "deny"}
    got = {"permission": "deny", "user_message": "blocked"}
    assert differences(expected, got, "subset") == []
    assert differences(expected, got, "exact") == ["user_message"]
    assert differences(expected, {"permission": "allow"}, "subset") == ["permission"]


def test_hook_changes_name_changed_and_missing_hooks() -> None:
    guard = {"source": "project", "command": "g.sh", "hook_index": 0, "outcome": "ok",
             "merge_use": "decided: deny"}  # fmt: skip
    other = {"source": "team", "command": "t.sh", "hook_index": 0, "outcome": "ok"}
    changes = hook_changes([guard, other], [{**guard, "merge_use": "no answer"}])
    assert [(c.source, c.command, c.changes) for c in changes] == [
        ("project", "g.sh", {"merge_use": ("decided: deny", "no answer")}),
        ("team", "t.sh", {"ran": (True, False)}),
    ]
    assert changes[0].text() == 'project `g.sh`: merge_use "decided: deny" -> "no answer"'


def test_replay_payload_moves_recorded_paths_into_the_replay_workspace(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(
        json.dumps({"stream": 1, "event": "afterFileEdit", "workspace": "/old/ws",
                    "payload": {"file_path": "/old/ws/src/a.py", "cwd": "/old/wsx",
                                "conversation_id": "c9", "workspace_roots": ["/old/ws"]}})
        + "\n"
        + json.dumps({"event": "beforeShellExecution", "payload": {"cwd": "{workspace}/sub"}})
        + "\n"
    )  # fmt: skip
    stream = load_stream(path)
    first = json.loads(replay_payload(stream.events[0], stream, 1, Path("/new")))
    assert first["file_path"] == "/new/src/a.py" and first["cwd"] == "/old/wsx"
    assert first["workspace_roots"] == ["/new"] and first["conversation_id"] == "c9"
    assert first["hook_event_name"] == "afterFileEdit"
    second = json.loads(replay_payload(stream.events[1], stream, 2, Path("/new")))
    assert second["cwd"] == "/new/sub"
    assert second["conversation_id"] == "replay-s" and second["generation_id"] == "replay-2"


def test_a_long_answer_is_shown_one_key_a_line_that_reads_back_as_the_answer() -> None:
    from cloudrunner.replay import ANSWER_WIDTH, answer_lines

    answer = {"agent_message": "x" * 40, "permission": "deny", "user_message": "y" * 30}
    lines = answer_lines("expected", answer)
    assert len(lines) == 3 and lines[0].startswith('      expected  {"agent_message": ')
    assert all(len(line) <= 16 + len('"agent_message": ') + 44 for line in lines)
    assert json.loads(" ".join(line[16:] for line in lines)) == answer
    short = {"permission": "allow"}
    assert answer_lines("got", short) == ['      got       {"permission": "allow"}']
    # one key, however long, stays on its line; so does a value that is not an object
    assert len(answer_lines("got", {"agent_message": "z" * (ANSWER_WIDTH * 2)})) == 1
    assert answer_lines("got", None) == ["      got       -"]
