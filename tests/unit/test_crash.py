"""The boundary for bugs: an exception that is not a CloudrunnerError ends as exit 70, its
traceback in a file of its own and one stderr line naming it; an expected failure stays one
line and its exit code; ^C is 130. Through `cloudrunner.cli.main`, the hook client's `main`
and the installed launcher, each with a bug injected."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cloudrunner import cli, crash
from cloudrunner.audit import stats as audit
from cloudrunner.commands import hook
from cloudrunner.errors import CloudrunnerError, ExitCode

INSTALLED = Path(sys.executable).with_name("cloudrunner")


def _boom(*_args: object) -> int:
    raise ZeroDivisionError("injected bug")


def _saved_traceback(err: str) -> Path:
    """The file the one stderr line names; checks the line is alone and says what it is."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    found = re.search(r"traceback written to (\S+);", lines[0])
    assert found, lines[0]
    assert "internal error (ZeroDivisionError)" in lines[0] and "bug" in lines[0]
    return Path(found.group(1))


@pytest.fixture(autouse=True)
def _own_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR


def test_a_bug_in_a_command_is_exit_70_with_its_traceback_in_a_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(audit, "stats_command", _boom)
    code = cli.main(["audit", "stats", str(tmp_path / "audit.jsonl")])
    assert code == ExitCode.INTERNAL == 70
    saved = _saved_traceback(capsys.readouterr().err)
    assert saved.parent == tmp_path and saved.name.startswith(crash.BUG_FILE_PREFIX)
    text = saved.read_text()
    assert text.startswith("Traceback") and "ZeroDivisionError: injected bug" in text
    assert "_boom" in text
    assert saved.stat().st_mode & 0o077 == 0  # the user's own: it may quote their input


def test_a_bug_while_building_the_parser_is_caught_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "build_parser", _boom)
    assert cli.main(["audit", "stats", "x"]) == 70
    assert _saved_traceback(capsys.readouterr().err).is_file()


def test_an_expected_failure_stays_one_line_and_its_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def refuse(*_args: object) -> int:
        raise CloudrunnerError("the log is broken; repair it", exit_code=ExitCode.FINDINGS)

    monkeypatch.setattr(audit, "stats_command", refuse)
    assert cli.main(["audit", "stats", "x"]) == 1
    assert capsys.readouterr().err == "cloudrunner: error: the log is broken; repair it\n"
    assert not list(tmp_path.glob(f"{crash.BUG_FILE_PREFIX}*"))


def test_interrupt_is_130_without_a_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def interrupt(*_args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(audit, "stats_command", interrupt)
    assert cli.main(["audit", "stats", "x"]) == 130
    assert capsys.readouterr().err == "cloudrunner: interrupted\n"
    monkeypatch.setattr(hook, "hook_command", interrupt)
    assert cli.main(["hook", "stop"]) == 130
    assert not list(tmp_path.glob(f"{crash.BUG_FILE_PREFIX}*"))


def test_a_bug_in_the_hook_client_is_exit_70_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(hook, "hook_command", _boom)
    assert hook.main(["hook", "stop"]) == 70
    err = capsys.readouterr()
    assert err.out == ""  # nothing half-written for the agent
    assert "injected bug" in _saved_traceback(err.err).read_text()


def test_when_the_file_cannot_be_written_the_traceback_goes_to_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    monkeypatch.setattr(audit, "stats_command", _boom)
    assert cli.main(["audit", "stats", "x"]) == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError: injected bug" in err
    last = err.splitlines()[-1]
    assert "internal error (ZeroDivisionError)" in last and "traceback above" in last


@pytest.mark.parametrize("command", ["hook", "audit"])
def test_the_installed_launcher_reports_a_bug_the_same_way(command: str, tmp_path: Path) -> None:
    """The launcher file itself, run with the client's (or a command's) handler replaced."""
    target = "cloudrunner.commands.hook:hook_command"
    words = ["hook", "stop"]
    if command == "audit":
        target = "cloudrunner.audit.stats:stats_command"
        words = ["audit", "stats", "x"]
    module, name = target.split(":")
    program = (
        "import importlib, runpy, sys\n"
        f"m = importlib.import_module({module!r})\n"
        "def boom(*a): raise ZeroDivisionError('injected bug')\n"
        f"setattr(m, {name!r}, boom)\n"
        f"sys.argv = [{str(INSTALLED)!r}, *{words!r}]\n"
        f"runpy.run_path({str(INSTALLED)!r}, run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", program], input=b"{}", capture_output=True, check=False,
        timeout=60, env={**os.environ, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    assert proc.returncode == 70, proc.stderr.decode()
    saved = _saved_traceback(proc.stderr.decode())
    assert saved.parent == tmp_path and "injected bug" in saved.read_text()
