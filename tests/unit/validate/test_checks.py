"""`validate`'s checks before any event: programs, scripts, matchers, unknown events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.cli import main
from cloudrunner.protocol.matchers import compile_matcher
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.validate import ImagePrograms, parse_listing, validate_paths
from cloudrunner.validate.checks import (
    first_program,
    matcher_problem,
    program_known,
    programs_of,
    simple_commands,
)
from tests.support.git_repos import write_hooks

IMAGE = parse_listing(
    "test/runtime:1",
    "sha256:" + "ab" * 32,
    "PATH=/usr/local/bin:/usr/bin:/bin\n"
    + "\n".join(
        f"/usr/bin/{p}" for p in ["python3", "python", "jq", "git", "bash", "sh", "env", "curl"]
    )
    + "\n/usr/local/bin/node\n/usr/local/bin/npx\n/bin/sh\n/bin/bash\n",
)


@pytest.fixture(autouse=True)
def _no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("python3 .cursor/hooks/x.py", ["python3"]),
        ("node hooks/a.js --flag", ["node"]),
        ("VAR=1 OTHER=two npx prettier --write", ["npx"]),
        ("env -i A=1 bun run x.ts", ["bun"]),
        ("exec uv run hook.py", ["uv"]),
        ('cd "$CURSOR_PROJECT_DIR" && deno run x.ts || true', ["deno"]),
        ("if [ -f x ]; then pwsh -File x.ps1; fi", ["pwsh"]),
        ("cat | jq -r .command 2>&1 | grep -q rm", ["cat", "jq", "grep"]),
        ("node x.js 2>&1 >&2", ["node"]),
        ("$HOME/.local/bin/tool", []),
        ("~/bin/hook", []),
        ("{{HOOK_PATH}}/run.sh", []),
        ("__HOME__/bin/x", []),
        ('"C:\\Users\\me\\python.exe" hook.py', []),
        ("echo '{}'", []),
        ("true", []),
        ("/usr/bin/env python3 x.py", ["/usr/bin/env"]),
        ("python3 -c 'unbalanced", []),
    ],
)
def test_programs_a_command_starts(command: str, expected: list[str]) -> None:
    used, _ = programs_of(command, None)
    assert [u.name for u in used] == expected


@given(st.text(max_size=200))
def test_any_command_is_read_without_raising(command: str) -> None:
    for words in simple_commands(command):
        first_program(words)


def test_a_scripts_shebang_names_its_interpreter(tmp_path: Path) -> None:
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "a.ts").write_text("#!/usr/bin/env -S bun run\nconsole.log(1)\n")
    (tmp_path / "hooks" / "b.sh").write_text("#!/bin/zsh\n")
    (tmp_path / "hooks" / "c.sh").write_text("echo no shebang\n")
    used, scripts = programs_of("hooks/a.ts && ./hooks/b.sh; hooks/c.sh", tmp_path)
    assert [(u.name, u.via) for u in used] == [
        ("bun", "the shebang of hooks/a.ts"),
        ("/bin/zsh", "the shebang of ./hooks/b.sh"),
    ]
    assert [s.word for s in scripts] == ["hooks/a.ts", "./hooks/b.sh", "hooks/c.sh"]


def test_program_lookup_by_name_and_by_path() -> None:
    assert program_known("python", IMAGE.programs, IMAGE.path_dirs) is True
    assert program_known("pwsh", IMAGE.programs, IMAGE.path_dirs) is False
    assert program_known("/bin/bash", IMAGE.programs, IMAGE.path_dirs) is True
    assert program_known("/usr/bin/zsh", IMAGE.programs, IMAGE.path_dirs) is False
    # a path outside the PATH directories cannot be judged from the listing
    assert program_known("/opt/tool/bin/x", IMAGE.programs, IMAGE.path_dirs) is None


def test_listing_parse_keeps_path_and_programs() -> None:
    assert IMAGE.path_dirs == ("/usr/local/bin", "/usr/bin", "/bin")
    assert "/usr/local/bin/node" in IMAGE.programs


@pytest.mark.parametrize(
    ("event", "matcher", "fragment"),
    [
        ("subagentStart", "Task", "`Task` is a tool name"),
        ("subagentStop", "Shell|Task", "never matches on subagentStop"),
        ("afterFileEdit", "Edit", "the constant `Write`"),
        ("afterFileEdit", r"\.py$", "the constant `Write`"),
        ("stop", "Stop|SubagentStop", None),
        ("beforeSubmitPrompt", "UserPromptSubmit", None),
        ("beforeReadFile", "Read", None),
        ("stop", "Completed", "the constant `Stop`"),
        ("preToolUse", "Bash", "Bash is Claude Code's name"),
        ("preToolUse", "mcp__github__*", "matches none of the tool names"),
        ("preToolUse", "Write|Edit|MultiEdit", None),
        ("preToolUse", "MCP:.*", None),
        ("preToolUse", "Shell", None),
        ("subagentStart", "explore", None),
        ("subagentStart", "specline-reviewer", None),  # a custom subagent: no verdict
        ("beforeShellExecution", "git\\s+push", None),  # any command string can match
        ("preToolUse", "*", None),
        ("preToolUse", "(", None),  # invalid: an error elsewhere, not this warning
    ],
)
def test_matchers_that_cannot_match_what_the_event_sends(
    event: str, matcher: str, fragment: str | None
) -> None:
    problem = matcher_problem(event, compile_matcher(matcher))
    if fragment is None:
        assert problem is None
    else:
        assert problem is not None and fragment in problem


def _codes(root: Path, programs: ImagePrograms | None = IMAGE) -> list[tuple[str, str]]:
    report = validate_paths([root], source=SourceKind.PROJECT, programs=programs)
    return [(d.code, d.message) for d in report.files[0].diagnostics]


def test_validate_warns_for_each_sandbox_problem_before_any_event(tmp_path: Path) -> None:
    root = write_hooks(
        tmp_path / "repo",
        {
            "preToolUse": [{"command": "pwsh -File .cursor/hooks/g.ps1", "failClosed": True}],
            "beforeShellExecution": [{"command": ".cursor/hooks/plain.sh"}],
            "afterFileEdit": [{"command": ".cursor/hooks/fmt.ts", "matcher": "Edit"}],
            "stop": [{"command": ".cursor/hooks/win.sh"}],
            "subagentStart": [{"command": "python3 x.py", "matcher": "Task"}],
            "beforeSubmitPrompt": [{"command": "python -c 'print(1)' | jq ."}],
            "PreToolUse": [{"command": "true"}],
        },
    )
    hooks = root / ".cursor" / "hooks"
    hooks.mkdir()
    (hooks / "g.ps1").write_text("exit 0\n")
    (hooks / "plain.sh").write_text("#!/bin/sh\necho '{}'\n")
    (hooks / "plain.sh").chmod(0o644)
    (hooks / "fmt.ts").write_text("#!/usr/bin/env bun\n")
    (hooks / "fmt.ts").chmod(0o755)
    (hooks / "win.sh").write_bytes(b"#!/bin/bash\r\necho\r\n")
    (hooks / "win.sh").chmod(0o755)
    found = _codes(root)
    codes = sorted(code for code, _ in found)
    assert codes == sorted(
        [
            "unknown-event",
            "program-not-in-image",  # pwsh
            "script-not-executable",  # plain.sh
            "program-not-in-image",  # bun, from fmt.ts's shebang
            "matcher-never-matches",  # afterFileEdit Edit
            "script-crlf",  # win.sh
            "matcher-never-matches",  # subagentStart Task
        ]
    )
    messages = "\n".join(message for _, message in found)
    assert "`pwsh` is not in image test/runtime:1" in messages
    assert "`bun` (the shebang of .cursor/hooks/fmt.ts) is not in image" in messages
    assert "chmod +x .cursor/hooks/plain.sh" in messages
    assert "some Cursor builds reject the whole hooks file" in messages


def test_without_an_image_listing_only_the_image_check_is_left_out(tmp_path: Path) -> None:
    root = write_hooks(
        tmp_path / "repo", {"preToolUse": [{"command": "pwsh x.ps1", "matcher": "Bash"}]}
    )
    assert [code for code, _ in _codes(root, None)] == ["matcher-never-matches"]


def test_project_hooks_with_an_environment_file_are_not_checked_against_the_default_image(
    tmp_path: Path,
) -> None:
    root = write_hooks(tmp_path / "repo", {"stop": [{"command": "deno run x.ts"}]})
    assert [code for code, _ in _codes(root)] == ["program-not-in-image"]
    (root / ".cursor" / "environment.json").write_text('{"install": "true"}')
    [(code, message)] = _codes(root)
    assert code == "image-check-skipped" and "environment.json builds" in message


def test_skipped_hooks_are_not_checked(tmp_path: Path) -> None:
    root = write_hooks(tmp_path / "repo", {"sessionStart": [{"command": "pwsh x.ps1"}]})
    assert _codes(root) == []


def test_cli_without_an_engine_still_validates_and_says_the_image_check_was_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_hooks(
        tmp_path / "repo", {"afterFileEdit": [{"command": "true", "matcher": "Edit"}]}
    )
    assert main(["validate", str(root)]) == 0
    out = capsys.readouterr().out
    assert "[matcher-never-matches]" in out
    assert "info: programs were not checked against image" in out
    assert "no Docker engine answers" in out
    assert main(["validate", "--strict", str(root)]) == 1
    capsys.readouterr()
    assert main(["validate", "--no-image-check", "--format", "json", str(root)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["notes"][0]["code"] == "image-check-skipped"
    assert "--no-image-check" in report["notes"][0]["message"]
