"""Filling the cache from a git repository: the commit's files, modes kept, big files out."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.parity.obtain import MAX_FILE_BYTES, absent_blobs, main
from tests.support.git_repos import committed_repo, git
from tests.unit.bench.parity.helpers import repo_entry, write_data_set


def _origin(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository with two commits; the first one is the one the data set names."""
    src = tmp_path / "owner+name"
    (src / ".cursor").mkdir(parents=True)
    hook = src / ".cursor" / "hook.sh"
    hook.write_text("#!/bin/sh\necho '{}'\n")
    hook.chmod(0o755)
    (src / "big.json").write_bytes(b"x" * (MAX_FILE_BYTES + 1))
    (src / "small.txt").write_text("small\n")
    os.symlink("/Users/someone/elsewhere", src / "dangling")
    committed_repo(src, "one", branch=None)
    first = git(src, "rev-parse", "HEAD")
    (src / "later.txt").write_text("later\n")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "two")
    blob = git(src, "rev-parse", f"{first}:small.txt")
    return src, first, blob


def test_the_named_commit_lands_in_the_cache_with_modes_and_without_big_files(
    tmp_path: Path,
) -> None:
    _src, first, _ = _origin(tmp_path)
    data = write_data_set(tmp_path / "data", [repo_entry("owner__name", commit=first)])
    cache = tmp_path / "cache"
    code = main([str(cache), "--parity", str(data), "--source", str(tmp_path / "{owner}+{name}")])
    assert code == 0
    tree = cache / "repos" / "owner__name"
    assert os.access(tree / ".cursor" / "hook.sh", os.X_OK)
    assert (tree / "small.txt").read_text() == "small\n"
    assert not (tree / "later.txt").exists()  # the commit, not the branch head
    assert not (tree / "big.json").exists()
    assert os.readlink(tree / "dangling") == "/Users/someone/elsewhere"
    assert not (tree / ".git").exists()
    info = json.loads((cache / "repos" / "owner__name.json").read_text())
    assert info["commit"] == first and info["dropped_over_300kB"] == ["big.json"]
    assert (cache / "cases.json").read_text() == (data / "cases.json").read_text()
    assert json.loads((cache / "missing.json").read_text()) == {}


def test_a_commit_the_source_lacks_is_recorded_as_missing_with_the_reason(tmp_path: Path) -> None:
    _origin(tmp_path)
    data = write_data_set(tmp_path / "data", [repo_entry("owner__name", commit="c" * 40)])
    cache = tmp_path / "cache"
    code = main([str(cache), "--parity", str(data), "--source", str(tmp_path / "{owner}+{name}")])
    assert code == 1
    missing = json.loads((cache / "missing.json").read_text())
    assert "commit " + "c" * 40 + " is not in" in missing["owner__name"]


def test_blobs_a_partial_mirror_lacks_are_found_and_left_out(tmp_path: Path) -> None:
    src, first, blob = _origin(tmp_path)
    loose = src / ".git" / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.unlink()  # what a mirror without its largest files looks like
    assert absent_blobs(src / ".git", first) == ["small.txt"]
    data = write_data_set(tmp_path / "data", [repo_entry("owner__name", commit=first)])
    cache = tmp_path / "cache"
    code = main([str(cache), "--parity", str(data), "--source", str(tmp_path / "{owner}+{name}")])
    assert code == 0
    info = json.loads((cache / "repos" / "owner__name.json").read_text())
    assert info["absent_in_source"] == ["small.txt"]
    assert (cache / "repos" / "owner__name" / ".cursor" / "hook.sh").exists()


def test_a_cache_inside_the_project_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    project = Path(__file__).resolve().parents[4]
    code = main([str(project / "parity-cache"), "--parity", "/nonexistent"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "outside" in err
    assert not (project / "parity-cache").exists()


def test_a_fetch_from_a_url_that_does_not_answer_is_recorded(tmp_path: Path) -> None:
    data = write_data_set(tmp_path / "data", [repo_entry("owner__name")])
    cache = tmp_path / "cache"
    url = (tmp_path / "no-such-repo.git").as_uri()
    code = main([str(cache), "--parity", str(data), "--source", url])
    assert code == 1
    assert "cannot fetch" in json.loads((cache / "missing.json").read_text())["owner__name"]
    assert subprocess.run(["git", "--version"], capture_output=True).returncode == 0


def test_a_url_source_fetches_only_the_named_commit(tmp_path: Path) -> None:
    _src, first, _ = _origin(tmp_path)
    data = write_data_set(tmp_path / "data", [repo_entry("owner__name", commit=first)])
    cache = tmp_path / "cache"
    url = "file://" + str(tmp_path / "{owner}+{name}")
    assert main([str(cache), "--parity", str(data), "--source", url]) == 0
    tree = cache / "repos" / "owner__name"
    assert (tree / "small.txt").exists() and not (tree / "later.txt").exists()
    info = json.loads((cache / "repos" / "owner__name.json").read_text())
    assert info["source"] == "file://" + str(tmp_path / "owner+name")
