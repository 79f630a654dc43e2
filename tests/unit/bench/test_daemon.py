"""Which compiled client part 2 times: the one beside the interpreter, or the override."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.daemon import compiled_client


def test_the_override_names_the_binary_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = tmp_path / "cloudrunner-hook-main"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("CLOUDRUNNER_BENCH_HOOK_BINARY", str(binary))
    assert compiled_client() == binary


@pytest.mark.parametrize("kind", ["missing", "directory", "not-executable"])
def test_an_override_that_is_no_binary_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    target = tmp_path / kind
    if kind == "directory":
        target.mkdir()
    elif kind == "not-executable":
        target.write_text("")
    monkeypatch.setenv("CLOUDRUNNER_BENCH_HOOK_BINARY", str(target))
    with pytest.raises(RuntimeError, match="CLOUDRUNNER_BENCH_HOOK_BINARY names the compiled"):
        compiled_client()


def test_without_the_override_it_is_the_one_beside_the_interpreter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CLOUDRUNNER_BENCH_HOOK_BINARY", raising=False)
    beside = Path(sys.executable).with_name("cloudrunner-hook")
    if beside.is_file():
        assert compiled_client() == beside
    else:
        with pytest.raises(RuntimeError, match="scripts/setup builds the compiled client"):
            compiled_client()
