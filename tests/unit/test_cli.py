"""The `cloudrunner` parser: one command's parser at a time, and the whole for help."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from cloudrunner.cli import build_parser, main
from tests.unit.audit.logs import sample_records, write_log


def test_the_whole_parser_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for command in ("run", "serve", "hook", "health", "images", "config", "gate", "validate",
                    "audit", "sandbox", "replay", "vm"):  # fmt: skip
        assert f"    {command} " in out, command


def test_a_mistyped_command_is_told_the_real_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["audti", "stats"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'audti'" in err and "'audit'" in err and "'run'" in err


def test_one_command_builds_only_its_own_parser() -> None:
    parser = build_parser("audit")
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == {"audit"}


def test_reading_the_audit_log_imports_neither_docker_nor_pydantic_nor_git(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records())
    script = (
        "import sys\n"
        "from cloudrunner.cli import main\n"
        f"code = main(['audit', 'stats', {str(log)!r}, '--jobs', '1'])\n"
        "heavy = sorted({'docker', 'pydantic', 'git'} & "
        "{m.split('.')[0] for m in sys.modules})\n"
        "print(code, heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 []"
