"""packaging/deb/: what the build script refuses before any work (its two variables are
inputs), the glibc the wheels need, and the package's own files agreeing with the code
(the settings load, the enterprise file is the default one, the unit's command parses). The
packages themselves are built, checked by lintian and installed in tests/e2e/test_deb_install.py."""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from cloudrunner.cli import build_parser
from cloudrunner.protocol.config import parse_hooks_file
from cloudrunner.settings import load_settings
from cloudrunner.sources import DEFAULT_ENTERPRISE_PATH

ROOT = Path(__file__).resolve().parents[3]
DEB = ROOT / "packaging" / "deb"


def _helper(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, DEB / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


needed = _helper("glibc_needed").needed
tidy = _helper("tidy_records").tidy


def _build(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(DEB / "build"), str(tmp_path / "dist")],
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


@pytest.mark.parametrize(
    "version",
    ["1.0 evil", "$(id)", "-1", "1.0-1", "1.0/../../x", "v1", "1.0\n2", "1.0;rm"],
)
def test_a_version_the_package_cannot_carry_is_refused_in_one_line(
    tmp_path: Path, version: str
) -> None:
    proc = _build(tmp_path, CLOUDRUNNER_DEB_VERSION=version)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert "CLOUDRUNNER_DEB_VERSION" in line
    assert not list((tmp_path / "dist").glob("*.deb"))


@pytest.mark.parametrize("archs", ["i386", "amd64 sparc", " ", "amd64;arm64", "../x"])
def test_an_unknown_architecture_is_refused_before_any_work(tmp_path: Path, archs: str) -> None:
    proc = _build(tmp_path, CLOUDRUNNER_DEB_ARCHS=archs)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert "CLOUDRUNNER_DEB_ARCHS" in line and "amd64, arm64" in line


def test_no_directory_is_a_usage_error() -> None:
    proc = subprocess.run(["bash", str(DEB / "build")], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 64 and "usage" in proc.stderr


def _wheel(lib: Path, name: str, *tags: str) -> None:
    info = lib / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "WHEEL").write_text("Wheel-Version: 1.0\n" + "".join(f"Tag: {t}\n" for t in tags))


def test_the_glibc_needed_is_the_newest_of_each_wheels_oldest_tag(tmp_path: Path) -> None:
    assert needed(tmp_path) == (2, 17)  # pure wheels only: the manylinux2014 floor
    _wheel(tmp_path, "pure", "py3-none-any")
    _wheel(tmp_path, "old", "cp311-cp311-manylinux1_x86_64", "cp311-cp311-manylinux_2_5_x86_64")
    assert needed(tmp_path) == (2, 17)
    _wheel(tmp_path, "multi", "cp311-cp311-manylinux_2_17_aarch64",
           "cp311-cp311-manylinux_2_28_aarch64")  # fmt: skip
    assert needed(tmp_path) == (2, 17)  # it runs on 2.17: its oldest tag counts
    _wheel(tmp_path, "new", "cp311-cp311-manylinux_2_34_x86_64")
    assert needed(tmp_path) == (2, 34)
    _wheel(tmp_path, "odd", "cp311-cp311-linux_x86_64", "Tag: nonsense")
    assert needed(tmp_path) == (2, 34)


def test_the_packaged_settings_load_and_name_the_default_enterprise_file() -> None:
    settings = load_settings(DEB / "config.toml", environ={})
    assert settings.sources.enterprise_hooks == DEFAULT_ENTERPRISE_PATH
    assert settings.state_dir == Path("/var/lib/cloudrunner")
    assert (DEB / "enterprise-hooks.json").name == DEFAULT_ENTERPRISE_PATH.name
    path = DEB / "enterprise-hooks.json"
    parsed = parse_hooks_file(path.read_bytes(), file=str(path))
    assert not any(d.is_error for d in parsed.diagnostics)


def test_the_packaged_unit_runs_a_serve_that_parses() -> None:
    lines = (DEB / "cloudrunner.service").read_text().splitlines()
    (exec_start,) = [x.removeprefix("ExecStart=") for x in lines if x.startswith("ExecStart=")]
    argv = shlex.split(exec_start)
    assert argv[0] == "/usr/bin/cloudrunner"
    build_parser(argv[1]).parse_args(argv[1:])
    assert "StateDirectory=cloudrunner" in lines
    assert not any(x.startswith("ExecStartPre") for x in lines)


def test_the_launcher_is_python_that_compiles() -> None:
    text = (DEB / "cloudrunner.launcher").read_text()
    assert text.startswith("#!/usr/bin/python3 -IS\n")
    compile(text, "cloudrunner.launcher", "exec")


def test_a_record_keeps_only_the_files_the_package_ships(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    info = lib / "x-1.0.dist-info"
    info.mkdir(parents=True)
    (lib / "x.py").write_text("")
    (info / "RECORD").write_text(
        "x.py,sha256=a,0\n"
        "x-1.0.dist-info/direct_url.json,sha256=b,9\n"  # removed by the build
        "../../bin/x,sha256=c,1\n"  # outside the tree
        '"x,with comma.py",sha256=d,2\n'  # absent
        "x-1.0.dist-info/RECORD,,\n"
    )
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "x").write_text("")  # exists, but outside lib: still dropped
    tidy(lib)
    assert (info / "RECORD").read_text() == "x.py,sha256=a,0\nx-1.0.dist-info/RECORD,,\n"
