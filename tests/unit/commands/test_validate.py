"""`cloudrunner validate` through the real CLI entry point, on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudrunner.cli import main
from tests.support.shared import corpus_dir
from tests.unit.corpus_verdicts import REJECTED, VERDICTS


def write(path: Path, document: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document, indent=2))
    return path


@pytest.fixture(autouse=True)
def _no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests need no Docker: the image check is skipped, with its note."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root / ".cursor" / "hooks" / "guard.sh", "#!/bin/sh\n").chmod(0o755)
    write(
        root / ".cursor" / "hooks.json",
        {
            "version": 1,
            "hooks": {
                "beforeShellExecution": [
                    {"command": ".cursor/hooks/guard.sh", "matcher": "curl", "failClosed": True}
                ],
                "sessionStart": [{"command": ".cursor/hooks/guard.sh"}],
                "stop": [{"type": "prompt", "prompt": "done?"}],
                "preToolUse": [{"command": "./hooks/guard.sh"}],
            },
        },
    )
    return root


def test_repository_verdicts_in_text(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(repo)]) == 0
    out = capsys.readouterr().out
    assert (
        "runs       beforeShellExecution[0] `.cursor/hooks/guard.sh`: runs in cloud agents" in out
    )
    assert "skipped    sessionStart[0]" in out and "not available in cloud agents" in out
    assert "skipped    stop[0] (prompt): prompt hooks never run in cloud agents" in out
    # project paths are relative to the repository root: ./hooks/guard.sh does not exist
    assert "warning: ./hooks/guard.sh does not exist" in out
    assert "use .cursor/hooks/guard.sh" in out
    assert "1 file(s) checked: 0 error(s), 1 warning(s)" in out


def test_desktop_profile_runs_session_start(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--profile", "desktop", str(repo / ".cursor")]) == 0
    out = capsys.readouterr().out
    assert "runs       sessionStart[0]" in out
    assert "prompt hooks are not executable by cloudrunner" in out


def test_errors_exit_1_with_file_line_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path / "hooks.json", '{\n  "hooks": {\n    "stop": [{"command": 5}]\n  }\n}')
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:3:26: error: `command` must be a string" in out
    assert "[wrong-type]" in out


def test_strict_fails_on_warnings(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--strict", str(repo)]) == 1


def test_json_format(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--format", "json", str(repo / ".cursor" / "hooks.json")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["profile"] == "cloud" and report["errors"] == 0 and report["warnings"] == 1
    (file,) = report["files"]
    verdicts = {(h["event"], h["verdict"]) for h in file["hooks"]}
    assert verdicts == {
        ("beforeShellExecution", "runs"), ("sessionStart", "skipped"),
        ("stop", "skipped"), ("preToolUse", "runs"),
    }  # fmt: skip
    assert file["diagnostics"][0]["code"] == "script-not-found"
    assert file["diagnostics"][0]["line"] is not None


def test_invalid_matcher_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(
        tmp_path / "h.json",
        {"hooks": {"preToolUse": [{"command": "x", "matcher": "(", "failClosed": True}]}},
    )
    assert main(["validate", "--format", "json", str(f)]) == 1
    hook = json.loads(capsys.readouterr().out)["files"][0]["hooks"][0]
    assert hook["verdict"] == "never-runs" and "blocks every preToolUse event" in hook["reason"]


def test_missing_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["validate", str(tmp_path)]) == 2
    assert "no hooks file in" in capsys.readouterr().err


def test_refused_file_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = write(tmp_path / "outside.json", {"hooks": {}})
    repo = tmp_path / "repo"
    (repo / ".cursor").mkdir(parents=True)
    (repo / ".cursor" / "hooks.json").symlink_to(outside)
    assert main(["validate", str(repo)]) == 1
    assert "[symlink-escape]" in capsys.readouterr().out


def test_whole_corpus_matches_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    paths = sorted(str(p) for p in corpus_dir().glob("*.json"))
    assert main(["validate", "--format", "json", *paths]) == 1
    report = json.loads(capsys.readouterr().out)
    assert len(report["files"]) == 200
    for f in report["files"]:
        expected = VERDICTS[Path(f["path"]).name]
        errors = {(d["code"], d["pointer"]) for d in f["diagnostics"] if d["severity"] == "error"}
        assert errors == set(expected.errors), f["path"]
        if expected.status == REJECTED:
            assert f["hooks"] == []
        else:
            assert len(f["hooks"]) == expected.hooks


def test_matchers_that_may_run_out_of_time_or_read_otherwise_in_javascript(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hooks = [
        {"command": "x", "matcher": "^(a+)+$", "failClosed": True},
        {"command": "y", "matcher": "(a|aa)*c"},
        {"command": "z", "matcher": "git\\Z"},
        {"command": "w", "matcher": "(?i)rm"},
        {"command": "v", "matcher": "rm|git\\s+push"},
    ]
    file = write(tmp_path / "hooks.json", {"version": 1, "hooks": {"beforeShellExecution": hooks}})
    assert main(["validate", "--format", "json", str(file)]) == 1  # (?i) is an error
    (report,) = json.loads(capsys.readouterr().out)["files"]
    found = {(d["code"], d["pointer"]): d for d in report["diagnostics"]}
    nested = found[("matcher-backtracking", "/hooks/beforeShellExecution/0/matcher")]
    assert nested["severity"] == "warning"
    assert "`(a+)+` repeats a group that holds a quantifier" in nested["message"]
    assert "and blocks since it is failClosed (outcome match_timeout)" in nested["message"]
    alternatives = found[("matcher-backtracking", "/hooks/beforeShellExecution/1/matcher")]
    assert "holds alternatives" in alternatives["message"]
    assert "blocks" not in alternatives["message"]
    letter = found[("matcher-not-javascript", "/hooks/beforeShellExecution/2/matcher")]
    assert "JavaScript matches the letter Z" in letter["message"]
    invalid = found[("invalid-matcher", "/hooks/beforeShellExecution/3/matcher")]
    assert invalid["severity"] == "error" and "not ECMAScript syntax" in invalid["message"]
    assert not any(pointer.startswith("/hooks/beforeShellExecution/4") for _, pointer in found)
    # located in the file, like every other diagnostic
    assert nested["line"] is not None


def test_claude_code_flag_judges_claude_hooks_as_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`validate --claude-code` is the switch the Claude Code page gives (issue 37)."""
    root = tmp_path / "claude-repo"
    hook = {"type": "command", "command": "echo hi"}
    write(
        root / ".claude" / "settings.json",
        {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}},
    )
    assert main(["validate", "--no-image-check", str(root)]) == 0
    off = capsys.readouterr().out
    assert "sources.claude_code is off" in off
    assert main(["validate", "--no-image-check", "--claude-code", str(root)]) == 0
    on = capsys.readouterr().out
    assert "runs       preToolUse[0] `echo hi`: runs in cloud agents (Claude Code PreToolUse" in on
    assert "sources.claude_code is off" not in on
