"""The release artefacts (`bash scripts/package`), built once per test run and shared.

`built()` runs scripts/package the first time it is called in a test process, into a
temporary directory (never the checkout's dist/), and hands the same `Packages` to every
later caller: the wheel's e2e test and the .deb's reuse one build. A build that failed is
not retried: every caller fails with its output.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ci import missing

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "scripts" / "package"
#: the wheels' platform tags, by the architecture names of `uname -m`
WHEEL_TAGS = {
    "x86_64": "py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64",
    "aarch64": "py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64",
}
#: the .deb architectures (Debian's names)
DEB_ARCHES = ("amd64", "arm64")


@dataclass(frozen=True)
class Packages:
    dist: Path
    version: str
    commit: str
    sdist: Path
    #: the platform wheels, by architecture (x86_64, aarch64)
    wheels: dict[str, Path]
    #: the .deb files by Debian architecture; empty where packaging/deb/build is absent
    debs: dict[str, Path]
    #: SHA256SUMS: artefact name -> hex digest
    sums: dict[str, str]
    #: what scripts/package said on stderr
    log: str


def read_sums(path: Path) -> dict[str, str]:
    sums: dict[str, str] = {}
    for line in path.read_text().splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
    return sums


def package(out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """`bash scripts/package --out OUT FLAGS...` from the checkout."""
    return subprocess.run(
        ["bash", str(PACKAGE), "--out", str(out), *flags],
        cwd=REPO, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip


def version_of_checkout() -> tuple[str, str]:
    script = str(REPO / "cloudrunner" / "version.py")
    version = subprocess.run(["python3", script], capture_output=True, text=True, check=True)
    commit = subprocess.run(
        ["python3", script, "--commit"], capture_output=True, text=True, check=True
    )
    return version.stdout.strip(), commit.stdout.strip()


_built: list[Packages | str] = []
_building: list[concurrent.futures.Future[Packages | str]] = []
_upgrade: list[concurrent.futures.Future[Path | str]] = []
#: the tests that call `built()`: when one of them is collected, the build starts at once
USERS = ("test_deb_install.py", "test_wheel_install.py")
#: the test that also installs an upgrade (`upgrade_built()`)
UPGRADE_USERS = ("test_deb_install.py",)
#: what the upgrade's version adds to the release's
UPGRADE_SUFFIX = "+upgrade1"
#: Debian's names of the architectures of `uname -m`
DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def start_building(*, upgrade: bool = False) -> None:
    """Start `built()`'s build in the background, then (with `upgrade`) the upgrade's, so
    they run while the tests before the ones that need them run (called when the
    session's tests are collected). The process waits for them at exit (each is bounded
    by its script's timeout)."""
    if _built or _building or shutil.which("go") is None:
        return
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="scripts-package")
    release = pool.submit(_build)
    _building.append(release)
    if upgrade:
        _upgrade.append(pool.submit(lambda: _build_upgrade(release.result())))
    pool.shutdown(wait=False)


def upgrade_built() -> Path:
    """A directory holding this machine's .deb at the release's version + UPGRADE_SUFFIX
    (packaging/deb/build from the release's own wheel; lintian skipped: the release's
    was checked), built once per test process."""
    if not _upgrade:
        release = built()
        done: concurrent.futures.Future[Path | str] = concurrent.futures.Future()
        done.set_result(_build_upgrade(release))
        _upgrade.append(done)
    result = _upgrade[0].result()
    if isinstance(result, str):
        pytest.fail(result, pytrace=False)
    return result


def _build_upgrade(release: Packages | str) -> Path | str:
    if isinstance(release, str):
        return release
    machine = platform.machine()
    out = Path(tempfile.mkdtemp(prefix="cloudrunner-upgrade-"))
    atexit.register(shutil.rmtree, out, True)
    if machine in release.wheels:
        shutil.copy2(release.wheels[machine], out)  # packaging/deb/build takes it from here
    env = {
        **os.environ,
        "CLOUDRUNNER_DEB_ARCHS": DEB_ARCH.get(machine, machine),
        "CLOUDRUNNER_DEB_VERSION": release.version + UPGRADE_SUFFIX,
        "CLOUDRUNNER_DEB_LINTIAN": "0",
    }
    proc = subprocess.run(["bash", "packaging/deb/build", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1200, check=False)  # fmt: skip
    if proc.returncode != 0:
        return f"packaging/deb/build of the upgrade failed:\n{proc.stderr[-4000:]}"
    return out


def built() -> Packages:
    """The artefacts of this checkout, built once per test process."""
    if not _built:
        if shutil.which("go") is None:
            missing("go is not installed: scripts/package builds the compiled client")
        _built.append(_building[0].result() if _building else _build())
    result = _built[0]
    if isinstance(result, str):
        pytest.fail(result, pytrace=False)
    return result


def _build() -> Packages | str:
    out = Path(tempfile.mkdtemp(prefix="cloudrunner-dist-"))
    atexit.register(shutil.rmtree, out, True)
    proc = package(out)
    if proc.returncode != 0:
        return f"bash scripts/package failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    version, commit = version_of_checkout()
    sums = read_sums(out / "SHA256SUMS")
    wheels = {arch: out / f"cloudrunner-{version}-{tag}.whl" for arch, tag in WHEEL_TAGS.items()}
    debs = {
        arch: out / f"cloudrunner_{version}_{arch}.deb"
        for arch in DEB_ARCHES
        if (out / f"cloudrunner_{version}_{arch}.deb").is_file()
    }
    for path in [out / f"cloudrunner-{version}.tar.gz", *wheels.values()]:
        if not path.is_file():
            return f"scripts/package did not write {path.name}; it wrote {sorted(os.listdir(out))}"
    return Packages(
        out, version, commit, out / f"cloudrunner-{version}.tar.gz", wheels, debs, sums,
        proc.stderr,
    )  # fmt: skip
