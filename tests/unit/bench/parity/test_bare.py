"""The bare run: matching hooks one after another, on the host, with the data set's environment."""

from __future__ import annotations

import json
from pathlib import Path

from bench.parity import bare
from tests.support.git_repos import write_hooks

PAYLOAD_BASE = {
    "conversation_id": "c",
    "generation_id": "g",
    "cursor_version": "1.7.52",
    "transcript_path": None,
    "user_email": "dev@example.invalid",
}


def _payload(root: Path, event: str, **fields: object) -> bytes:
    document = {**PAYLOAD_BASE, "hook_event_name": event, "workspace_roots": [str(root)], **fields}
    return json.dumps(document).encode()


def test_hooks_run_in_file_order_and_the_most_restrictive_answer_wins(tmp_path: Path) -> None:
    root = write_hooks(
        tmp_path / "repo",
        {
            "beforeShellExecution": [
                {"command": "echo first >> order.txt; echo '{}'"},
                {"command": "echo never >> order.txt", "matcher": "^npm "},
                {"command": "echo second >> order.txt; echo 'no way' >&2; exit 2"},
            ]
        },
    )
    home = tmp_path / "home"
    home.mkdir()
    result = bare.run(
        root,
        home,
        "beforeShellExecution",
        _payload(root, "beforeShellExecution", command="git push", cwd=str(root)),
        "1.7.52",
    )
    assert (root / "order.txt").read_text() == "first\nsecond\n"
    assert [(h.index, h.matched, h.exit_code) for h in result.hooks] == [
        (0, True, 0),
        (1, False, None),
        (2, True, 2),
    ]
    assert result.answer["permission"] == "deny"
    assert result.answer["agent_message"] == "no way"
    assert result.wall_ms > 0


def test_a_hook_sees_only_the_data_sets_environment_and_the_payload(tmp_path: Path) -> None:
    root = write_hooks(
        tmp_path / "repo", {"stop": [{"command": "env > env.txt; cat > stdin.json"}]}
    )
    home = tmp_path / "home"
    home.mkdir()
    payload = _payload(root, "stop", status="completed", loop_count=0)
    bare.run(root, home, "stop", payload, "1.7.52")
    env = dict(
        line.split("=", 1) for line in (root / "env.txt").read_text().splitlines() if "=" in line
    )
    env.pop("PWD", None), env.pop("SHLVL", None), env.pop("_", None)
    assert env == {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(home),
        "CURSOR_PROJECT_DIR": str(root),
        "CLAUDE_PROJECT_DIR": str(root),
        "CURSOR_VERSION": "1.7.52",
        "CURSOR_CODE_REMOTE": "true",
    }  # no CURSOR_USER_EMAIL, as when the answers were recorded
    assert (root / "stdin.json").read_bytes() == payload


def test_a_hook_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    root = write_hooks(
        tmp_path / "repo",
        {
            "afterFileEdit": [
                {"command": "(sleep 30; echo late > late.txt) & sleep 30", "timeout": 1}
            ]
        },
    )
    home = tmp_path / "home"
    home.mkdir()
    result = bare.run(
        root,
        home,
        "afterFileEdit",
        _payload(root, "afterFileEdit", file_path=str(root / "a"), edits=[]),
        "1.7.52",
    )
    assert [h.outcome for h in result.hooks] == ["timeout"]
    assert result.answer == {}
    assert not (root / "late.txt").exists()
