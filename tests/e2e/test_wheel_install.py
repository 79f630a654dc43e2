"""The wheel as its users get it: `bash scripts/package` builds it (once per run, shared
with the .deb's test: tests/support/packages.py), pip installs it into a fresh virtualenv
outside the checkout, and its commands work from there with no source tree in reach: both
print one version and commit, `validate` reads the demo repository, the image recipes are
found in the package, the wheel's daemon answers `health`, and a client of another version
says so in one line. Two builds of one commit give the same SHA256SUMS; a build without Go
makes a pure wheel and says so."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from cloudrunner.images import artefacts as image_artefacts
from cloudrunner.images import build as images
from tests.conftest import WORKER_ID_PREFIX
from tests.e2e.conftest import EXAMPLES, make_deployment
from tests.support.ci import missing
from tests.support.daemon_process import DaemonProcess
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import committed_repo
from tests.support.packages import REPO, Packages, built, package, read_sums

pytestmark = pytest.mark.docker

#: ELF e_machine of each wheel's client
ELF_MACHINE = {"x86_64": 62, "aarch64": 183}


@pytest.fixture(scope="module")
def packages() -> Packages:
    return built()


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory far from the checkout (nothing importable in it)."""
    path = tmp_path_factory.mktemp("elsewhere")
    assert REPO not in path.parents
    return path


def _env(venv: Path) -> dict[str, str]:
    """The environment of a user's shell with the venv's bin first: nothing of the
    checkout's environment (its venv, PYTHONPATH, cloudrunner's variables)."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CLOUDRUNNER_", "PYTHON", "VIRTUAL_ENV"))
    }
    return {**keep, "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"}


@pytest.fixture(scope="module")
def venv(packages: Packages, tmp_path_factory: pytest.TempPathFactory, elsewhere: Path) -> Path:
    """A fresh virtualenv with this machine's wheel installed (its dependencies from PyPI)."""
    arch = platform.machine()
    if arch not in packages.wheels:
        missing(f"scripts/package made no wheel for this machine ({arch})")
    path = tmp_path_factory.mktemp("wheel-venv") / "venv"
    python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([python, "-m", "venv", str(path)], check=True, cwd=elsewhere, timeout=300)
    pip = subprocess.run(
        [str(path / "bin" / "python"), "-m", "pip", "install", "-q",
         "--disable-pip-version-check", str(packages.wheels[arch])],
        cwd=elsewhere, env=_env(path), capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr[-3000:]
    return path


def _run(venv: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), cwd=cwd, env=_env(venv), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


def test_the_installed_package_is_the_venvs_not_the_checkout(venv: Path, elsewhere: Path) -> None:
    code = "import cloudrunner, sys; print(cloudrunner.__file__); print('\\n'.join(sys.path))"
    proc = _run(venv, elsewhere, str(venv / "bin" / "python"), "-c", code)
    assert proc.returncode == 0, proc.stderr
    where, *path = proc.stdout.splitlines()
    assert Path(where).is_relative_to(venv), where
    assert not any(entry and Path(entry).is_relative_to(REPO) for entry in path), path


def test_both_commands_print_the_same_version_and_commit(
    venv: Path, elsewhere: Path, packages: Packages
) -> None:
    assert packages.commit not in ("", "unknown")
    stamp = f"{packages.version} (commit {packages.commit})"
    python = _run(venv, elsewhere, "cloudrunner", "--version")
    compiled = _run(venv, elsewhere, "cloudrunner-hook", "--version")
    assert (python.returncode, python.stdout, python.stderr) == (0, f"cloudrunner {stamp}\n", "")
    assert (compiled.returncode, compiled.stdout, compiled.stderr) == (
        0, f"cloudrunner-hook {stamp}\n", ""
    )  # fmt: skip
    assert shutil.which("cloudrunner-hook", path=str(venv / "bin")) == str(
        venv / "bin" / "cloudrunner-hook"
    )


def test_validate_reads_the_demo_repository(venv: Path, elsewhere: Path, tmp_path: Path) -> None:
    repo = tmp_path / "demo"
    shutil.copytree(EXAMPLES / "demo-repo", repo)
    committed_repo(repo, "demo")
    proc = _run(venv, elsewhere, "cloudrunner", "validate", str(repo))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 run(s) under the cloud profile" in proc.stdout
    assert "0 error(s), 0 warning(s)" in proc.stdout


def test_the_image_recipes_are_found_in_the_package(venv: Path, elsewhere: Path) -> None:
    proc = _run(venv, elsewhere, "cloudrunner", "images", "recipes")
    assert proc.returncode == 0, proc.stderr
    rows = {name: (Path(path), refs.split()) for name, path, refs in
            (line.split("\t") for line in proc.stdout.splitlines())}  # fmt: skip
    assert set(rows) == {"base", "hook-runtime", "egress-proxy", "worker"}
    worker, _ = rows["worker"]
    assert worker.is_relative_to(venv)
    for name in ("Dockerfile", "pyproject.toml", "README.md", "hatch_build.py",
                 "launcher/cloudrunner"):  # fmt: skip
        assert (worker / name).read_bytes() == (REPO / name).read_bytes(), name
    for name in ("hook-runtime", "egress-proxy"):
        path, refs = rows[name]
        assert path.is_relative_to(venv), path
        source = REPO / "images" / name
        shipped, tracked = (
            sorted(
                p.relative_to(where)
                for p in where.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts  # pip compiles the .py files
            )
            for where in (path, source)
        )
        assert shipped == tracked
        for relative in shipped:
            assert (path / relative).read_bytes() == (source / relative).read_bytes()
        assert refs[-1] == f"cloudrunner/{name}:latest"


def test_a_missing_recipes_dir_named_by_the_environment_is_one_line(
    venv: Path, elsewhere: Path
) -> None:
    env = {**_env(venv), "CLOUDRUNNER_IMAGES_DIR": str(elsewhere / "nowhere")}
    proc = subprocess.run(
        ["cloudrunner", "images", "recipes"], cwd=elsewhere, env=env, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "CLOUDRUNNER_IMAGES_DIR" in proc.stderr and "nowhere" in proc.stderr


def test_each_wheel_carries_its_architectures_static_client(packages: Packages) -> None:
    for arch, wheel in packages.wheels.items():
        with zipfile.ZipFile(wheel) as archive:
            data = f"cloudrunner-{packages.version}.data/scripts/"
            client = archive.getinfo(data + "cloudrunner-hook")
            assert (client.external_attr >> 16) & 0o777 == 0o755
            head = archive.read(client)[:20]
            assert head[:4] == b"\x7fELF"
            assert int.from_bytes(head[18:20], "little") == ELF_MACHINE[arch]
            assert archive.read(data + "cloudrunner").startswith(b"#!python")
            info = archive.read("cloudrunner/_build_info.py").decode()
            assert f"COMMIT = {packages.commit!r}" in info
            wheel_file = archive.read(f"cloudrunner-{packages.version}.dist-info/WHEEL").decode()
            assert "Root-Is-Purelib: false" in wheel_file
            assert f"Tag: py3-none-manylinux_2_17_{arch}" in wheel_file
            assert f"Tag: py3-none-manylinux2014_{arch}" in wheel_file


def test_the_sdist_holds_what_a_wheel_is_built_from(packages: Packages) -> None:
    with tarfile.open(packages.sdist) as archive:
        names = {name.partition("/")[2] for name in archive.getnames()}
    for needed in ("hatch_build.py", "pyproject.toml", "client/build", "client/main.go",
                   "client/internal/hook/hook.go", "launcher/cloudrunner",
                   "images/hook-runtime/Dockerfile", "cloudrunner/version.py",
                   "cloudrunner/_build_info.py"):  # fmt: skip
        assert needed in names, needed
    assert not any(name.startswith(("tests/", "docs/", ".venv/")) for name in names)


def test_sha256sums_covers_every_artefact(packages: Packages) -> None:
    files = {p.name for p in packages.dist.iterdir()} - {"SHA256SUMS"}
    assert set(packages.sums) == files
    for name, digest in packages.sums.items():
        assert hashlib.sha256((packages.dist / name).read_bytes()).hexdigest() == digest
    check = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=packages.dist, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_second_build_of_the_commit_gives_the_same_sums(
    packages: Packages, tmp_path: Path
) -> None:
    """The sdist and the wheels (the .deb is left out of the second build to keep CI short;
    its own test compares it)."""
    proc = package(tmp_path / "again", "--no-deb")
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = read_sums(tmp_path / "again" / "SHA256SUMS")
    first = {name: digest for name, digest in packages.sums.items() if not name.endswith(".deb")}
    assert again == first


def test_without_go_the_wheel_is_pure_and_says_so(packages: Packages, tmp_path: Path) -> None:
    no_go = tmp_path / "bin"
    no_go.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDRUNNER_", "VIRTUAL_ENV"))}
    env.update(PATH=str(no_go), CLOUDRUNNER_COMMIT=packages.commit)
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("hatchling")), "build", "-t", "wheel",
         "-d", str(tmp_path / "out")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = [
        line for line in (proc.stdout + proc.stderr).splitlines() if "go is not on PATH" in line
    ]
    assert len(said) == 1, proc.stdout + proc.stderr
    assert "cloudrunner hook" in said[0]
    wheel = tmp_path / "out" / f"cloudrunner-{packages.version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert f"cloudrunner-{packages.version}.data/scripts/cloudrunner" in names
    assert f"cloudrunner-{packages.version}.data/scripts/cloudrunner-hook" not in names
    assert "cloudrunner/_images/hook-runtime/Dockerfile" in names


@pytest.fixture
def wheel_daemon(
    venv: Path, tmp_path_factory: pytest.TempPathFactory, docker_client: docker.DockerClient
) -> Iterator[DaemonProcess]:
    """The installed wheel's `cloudrunner serve` on the demo deployment."""
    tracker = DockerTracker(docker_client, worker_id=f"{WORKER_ID_PREFIX}-{uuid.uuid4().hex[:12]}")
    base = tmp_path_factory.mktemp("wheel-serve")
    base.chmod(0o755)
    deployment = make_deployment(base, tracker.worker_id)
    env = {**_env(venv), "CLOUDRUNNER_WORKER_ID": tracker.worker_id}
    daemon = DaemonProcess(
        [str(venv / "bin" / "cloudrunner"), "serve", *deployment.flags()], env,
        deployment.state / "cloudrunner.sock",
    )  # fmt: skip
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.kill() if daemon.proc is None else daemon.stop()
        leftovers = tracker.cleanup()
    assert not leftovers, f"containers left running were removed: {leftovers}"


def test_health_says_when_the_client_and_daemon_versions_differ(
    wheel_daemon: DaemonProcess, venv: Path, elsewhere: Path, packages: Packages, tmp_path: Path
) -> None:
    socket = ["--socket", str(wheel_daemon.socket_path)]
    for client in ("cloudrunner", "cloudrunner-hook"):
        same = _run(venv, elsewhere, client, "health", *socket)
        assert (same.returncode, same.stderr) == (0, ""), client
        assert json.loads(same.stdout) == {
            "status": "ok", "version": packages.version, "commit": packages.commit
        }  # fmt: skip
    # a compiled client of another version, against the wheel's daemon
    other = tmp_path / "cloudrunner-hook"
    env = {**os.environ, "CLOUDRUNNER_VERSION": "99.0.0", "CLOUDRUNNER_COMMIT": "0123456789ab"}
    subprocess.run(
        ["bash", str(REPO / "client" / "build"), "--host", str(other)], env=env, check=True,
        capture_output=True, timeout=300,
    )  # fmt: skip
    told = _run(venv, elsewhere, str(other), "health", *socket)
    assert told.returncode == 0, told.stderr
    assert told.stderr == (
        f"cloudrunner: the daemon is version {packages.version} (commit {packages.commit}) and "
        "this client 99.0.0; use one version of both (cloudrunner --version, "
        "cloudrunner-hook --version)\n"
    )


def test_package_refuses_to_empty_a_directory_that_holds_other_files(tmp_path: Path) -> None:
    out = tmp_path / "home"
    out.mkdir()
    (out / "precious").write_text("mine\n")
    proc = package(out)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        f"package: error: {out} holds {out / 'precious'}, which is not an artefact of a "
        "previous build; give --out an empty or new directory"
    )
    assert sorted(p.name for p in out.iterdir()) == ["precious"]


def test_the_shipped_recipes_give_the_checkouts_build_keys(venv: Path, elsewhere: Path) -> None:
    """So `cloudrunner images build` from the wheel finds the images the checkout built up to
    date (the same keys), and would build the same ones."""
    code = (
        "from cloudrunner.images import build as images, artefacts as a; d = images.images_dir(); "
        "r = d / 'hook-runtime'; "
        "print(images.runtime_key((r / 'Dockerfile').read_bytes(), 'base', "
        "(r / a.MANIFEST_NAME).read_bytes())); "
        "print(images.context_key(d / 'egress-proxy', 'base'))"
    )
    proc = _run(venv, elsewhere, str(venv / "bin" / "python"), "-c", code)
    assert proc.returncode == 0, proc.stderr
    source = REPO / "images"
    runtime = source / "hook-runtime"
    assert proc.stdout.split() == [
        images.runtime_key(
            (runtime / "Dockerfile").read_bytes(), "base",
            (runtime / image_artefacts.MANIFEST_NAME).read_bytes(),
        ),
        images.context_key(source / "egress-proxy", "base"),
    ]  # fmt: skip


def test_the_worker_image_builds_from_the_installed_wheel(
    venv: Path, elsewhere: Path, packages: Packages, docker_client: docker.DockerClient
) -> None:
    """`cloudrunner images worker` with no checkout: the recipe, the package and the client
    come from the installation."""
    tag = f"cloudrunner/worker:test-{uuid.uuid4().hex[:10]}"
    try:
        proc = _run(venv, elsewhere, "cloudrunner", "images", "worker", "--tag", tag)
        assert proc.returncode == 0, proc.stderr[-4000:]
        image = docker_client.images.get(tag)
        assert proc.stdout.strip() == image.id
        assert image.labels["org.opencontainers.image.version"] == packages.version
        assert image.labels["org.opencontainers.image.revision"] == packages.commit
        script = "cloudrunner --version; cloudrunner-hook --version"
        out = docker_client.containers.run(
            tag, entrypoint=["sh", "-c"], command=[script], remove=True, network_mode="none"
        ).decode()
        stamp = f"{packages.version} (commit {packages.commit})"
        assert out.splitlines() == [f"cloudrunner {stamp}", f"cloudrunner-hook {stamp}"]
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(tag, noprune=True)
