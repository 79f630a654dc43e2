"""The wheel build hook's own logic (hatch_build.py): which wheel for which machine and
request, its platform tags, and the commit stamp it writes. The builds themselves are in
tests/e2e/test_wheel_install.py."""

from __future__ import annotations

import importlib.util
import platform
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.tags import parse_tag

from tests.support.git_repos import committed_repo

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hatch_build", REPO / "hatch_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hb = _load()


@pytest.mark.parametrize(
    ("requested", "machine", "arch"),
    [
        (None, "x86_64", "x86_64"),
        (None, "aarch64", "aarch64"),
        (None, "arm64", "aarch64"),  # macOS-style names
        ("", "x86_64", "x86_64"),
        ("amd64", "aarch64", "x86_64"),  # cross-building: the request wins
        ("ARM64", "x86_64", "aarch64"),
        (" aarch64 ", "x86_64", "aarch64"),
        ("pure", "x86_64", None),
    ],
)
def test_the_target_follows_the_request_else_the_machine(
    requested: str | None, machine: str, arch: str | None
) -> None:
    target = hb.choose_target(requested, machine, have_go=True)
    assert target.arch == arch
    assert target.note == ""


def test_without_go_an_unnamed_target_is_the_pure_wheel_said_in_one_line() -> None:
    target = hb.choose_target(None, "x86_64", have_go=False)
    assert (target.arch, target.tag, target.goarch) == (None, "py3-none-any", None)
    assert "\n" not in target.note
    assert target.note.startswith("go is not on PATH")
    assert "`cloudrunner hook` works" in target.note


def test_a_machine_without_a_client_gets_the_pure_wheel_and_says_which() -> None:
    target = hb.choose_target(None, "riscv64", have_go=True)
    assert target.arch is None
    assert target.note.startswith("no compiled client for riscv64:")


def test_another_system_gets_the_pure_wheel_unless_a_linux_wheel_is_asked_for() -> None:
    target = hb.choose_target(None, "arm64", have_go=True, system="Darwin")
    assert target.arch is None
    assert target.note.startswith("no compiled client for Darwin arm64:")
    assert hb.choose_target("aarch64", "arm64", have_go=True, system="Darwin").arch == "aarch64"


def test_a_python_that_refuses_manylinux_wheels_gets_the_pure_wheel_unless_asked() -> None:
    """musl (Alpine): `pip install .` must build a wheel pip there installs."""
    target = hb.choose_target(None, "x86_64", have_go=True, accepts_manylinux=False)
    assert target.arch is None
    assert target.note.startswith("this Python does not install manylinux wheels:")
    assert hb.choose_target("x86_64", "x86_64", True, accepts_manylinux=False).arch == "x86_64"


def test_this_python_installs_the_manylinux_wheel_of_its_machine() -> None:
    assert hb.accepts_manylinux(platform.machine())
    other = "aarch64" if platform.machine() == "x86_64" else "x86_64"
    assert not hb.accepts_manylinux(other)


@pytest.mark.parametrize("commit", ["0123456789ab", "0123456789ab+dirty", "unknown"])
def test_a_commit_id_is_kept(commit: str) -> None:
    assert hb.check_commit(commit) == commit


@pytest.mark.parametrize("commit", ["", "a b", "abc\nCOMMIT = 1", "x" * 65, "é", "a'b"])
def test_a_commit_that_is_not_one_word_is_refused_in_one_line(commit: str) -> None:
    with pytest.raises(hb.TargetError) as exc:
        hb.check_commit(commit)
    assert "\n" not in str(exc.value) and "is not a commit id" in str(exc.value)


def test_a_named_target_without_go_is_an_error_not_a_pure_wheel() -> None:
    with pytest.raises(hb.TargetError, match=r"needs Go .* CLOUDRUNNER_WHEEL_ARCH=pure"):
        hb.choose_target("x86_64", "x86_64", have_go=False)


@pytest.mark.parametrize("requested", ["riscv64", "x86", "x86_64;rm -rf /", "any", "none"])
def test_an_unknown_target_is_named_in_one_line(requested: str) -> None:
    with pytest.raises(hb.TargetError) as exc:
        hb.choose_target(requested, "x86_64", have_go=True)
    message = str(exc.value)
    assert repr(requested) in message and "x86_64, aarch64 or pure" in message
    assert "\n" not in message


@given(st.text(max_size=40))
def test_any_request_is_a_known_target_or_a_target_error(requested: str) -> None:
    try:
        target = hb.choose_target(requested, "x86_64", have_go=True)
    except hb.TargetError:
        return
    assert target.arch in (None, "x86_64", "aarch64")


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_platform_tags_are_manylinux_tags_pip_accepts(arch: str) -> None:
    tag = hb.platform_tag(arch)
    assert tag == f"py3-none-manylinux_2_17_{arch}.manylinux2014_{arch}"
    platforms = {t.platform for t in parse_tag(tag)}
    assert platforms == {f"manylinux_2_17_{arch}", f"manylinux2014_{arch}"}
    assert {t.interpreter for t in parse_tag(tag)} == {"py3"}
    assert hb.GOARCH[arch] in ("amd64", "arm64")


def test_no_tag_for_an_architecture_without_a_client() -> None:
    with pytest.raises(hb.TargetError, match="no client for ppc64le"):
        hb.platform_tag("ppc64le")


@given(st.text(max_size=80))
def test_the_commit_stamp_is_python_that_gives_back_the_commit(commit: str) -> None:
    namespace: dict[str, object] = {}
    exec(hb.build_info_source(commit), namespace)
    assert namespace["COMMIT"] == commit
    assert set(namespace) == {"__builtins__", "__doc__", "COMMIT"}


def test_the_commit_comes_from_the_environment_then_the_sdist_then_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "tree"
    (root / "cloudrunner").mkdir(parents=True)
    shutil.copyfile(REPO / "cloudrunner" / "version.py", root / "cloudrunner" / "version.py")
    monkeypatch.delenv(hb.COMMIT_ENV, raising=False)
    assert hb.find_commit(root) == "unknown"  # neither a stamp nor a checkout
    committed_repo(root, "x", branch=None)
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert hb.find_commit(root) == head
    (root / "cloudrunner" / "_build_info.py").write_text(hb.build_info_source("from-the-sdist"))
    assert hb.find_commit(root) == "from-the-sdist"
    monkeypatch.setenv(hb.COMMIT_ENV, "from-the-environment")
    assert hb.find_commit(root) == "from-the-environment"


def test_recipe_files_leave_out_byte_code(tmp_path: Path) -> None:
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"x")
    (tmp_path / "stray.pyc").write_bytes(b"x")
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    (tmp_path / "a.py").write_text("")
    assert [p.name for p in hb.recipe_files(tmp_path)] == ["Dockerfile", "a.py"]
