"""`python -m bench.parity` refuses what it cannot run with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.parity.cli import main
from tests.unit.bench.parity.helpers import repo_entry, write_data_set


def test_a_missing_cache_is_one_line_naming_how_to_fill_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no parity cache at" in err and "bench.parity.obtain" in err


def test_an_unknown_repository_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_data_set(tmp_path, [repo_entry("a__one")])
    assert main([str(tmp_path), "--only", "b__two"]) == 2
    assert "no repository named b__two" in capsys.readouterr().err


def test_a_negative_repeat_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_data_set(tmp_path, [repo_entry("a__one")])
    assert main([str(tmp_path), "--repeat", "-1"]) == 2
    assert "--repeat must be 0 or more" in capsys.readouterr().err


def test_a_work_directory_with_content_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_data_set(tmp_path / "cache", [repo_entry("a__one")])
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("mine")
    assert main([str(tmp_path / "cache"), "--work", str(work)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert (work / "keep.txt").read_text() == "mine"
