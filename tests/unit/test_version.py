"""cloudrunner/version.py: the one version, the commit, and what `--version` prints."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib.metadata import version as installed_version
from pathlib import Path

import pytest

import cloudrunner
from cloudrunner import version
from cloudrunner.cli import main
from tests.support.git_repos import committed_repo

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "cloudrunner" / "version.py"


def test_one_version_for_the_package_its_metadata_and_the_script() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:[a-z0-9.+-]*)", version.VERSION)
    assert cloudrunner.__version__ == version.VERSION
    assert installed_version("cloudrunner") == version.VERSION  # hatchling read the file
    printed = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True
    )
    assert printed.stdout == version.VERSION + "\n"


def test_the_script_refuses_other_arguments_in_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--bogus"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 1
    assert proc.stderr == "usage: python3 cloudrunner/version.py [--commit]\n"


def test_version_flag_prints_the_version_and_commit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out == f"cloudrunner {version.VERSION} (commit {version.commit()})\n"


def _checkout_with_version_script(root: Path) -> Path:
    (root / "cloudrunner").mkdir(parents=True)
    shutil.copyfile(SCRIPT, root / "cloudrunner" / "version.py")
    (root / "README").write_text("tracked\n")
    return committed_repo(root, "x", branch=None)


def test_a_checkouts_commit_is_its_head_and_says_dirty(tmp_path: Path) -> None:
    root = _checkout_with_version_script(tmp_path / "checkout")
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert version.git_commit(str(root)) == head[: version.COMMIT_LENGTH]
    (root / "untracked").write_text("not a change to the commit\n")
    assert version.git_commit(str(root)) == head[: version.COMMIT_LENGTH]
    (root / "README").write_text("changed\n")
    assert version.git_commit(str(root)) == head[: version.COMMIT_LENGTH] + "+dirty"
    # the script run from anywhere asks the checkout it lies in
    proc = subprocess.run(
        [sys.executable, str(root / "cloudrunner" / "version.py"), "--commit"],
        cwd="/", capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert proc.stdout.strip() == head[: version.COMMIT_LENGTH] + "+dirty"


def test_only_the_directory_above_the_package_counts_as_the_checkout(tmp_path: Path) -> None:
    """A virtualenv inside someone's repository: that repository's HEAD is not ours."""
    outer = _checkout_with_version_script(tmp_path / "outer")
    site = outer / "venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    assert version.git_commit(str(site)) is None
    assert version.git_commit(str(tmp_path / "nowhere")) is None


def test_a_repository_git_cannot_read_is_unknown_not_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "broken"
    (root / "cloudrunner").mkdir(parents=True)
    shutil.copyfile(SCRIPT, root / "cloudrunner" / "version.py")
    (root / ".git").write_text("gitdir: /nonexistent\n")
    assert version.git_commit(str(root)) is None


def test_identity_is_the_version_and_commit() -> None:
    assert version.identity() == {"version": version.VERSION, "commit": version.commit()}
    assert version.describe("x") == f"x {version.VERSION} (commit {version.commit()})"


def test_version_works_where_git_is_missing(tmp_path: Path) -> None:
    """A worker image's build stage has no git; GitPython fails at import without one."""
    bare = tmp_path / "no-git-here"
    bare.mkdir()
    env = {"PATH": str(bare), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "--version"],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"cloudrunner {version.VERSION} ")
