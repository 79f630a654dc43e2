"""The build hook (hatchling's custom hook, `[tool.hatch.build.hooks.custom]`).

The wheel:
- carries the compiled client `cloudrunner-hook` as a script beside `cloudrunner`, built
  with Go for the target (`client/build --arch`), under a manylinux platform tag (the
  binary is static: no libc at all, so the oldest manylinux tag fits);
- carries the image recipes (images/hook-runtime, images/egress-proxy) as package data in
  `cloudrunner/_images/`, where `cloudrunner.images.images_dir()` finds them, and the
  worker's (`cloudrunner/_images/worker/`: `cloudrunner.images.worker_build`);
- carries `cloudrunner/_build_info.py`, the commit it was built from.

The target is `$CLOUDRUNNER_WHEEL_ARCH`: `x86_64` (or `amd64`), `aarch64` (or `arm64`), or
`pure` (no client: a py3-none-any wheel); unset, this machine's architecture when Go is on
PATH, else a pure wheel, said in one line. A target named explicitly that cannot be built
(no Go) is an error, so `scripts/package` never ships a wheel without its client.

The sdist carries `cloudrunner/_build_info.py` too, so a wheel built from it (no .git)
still knows its commit. Editable installs get none of this (the checkout has the images,
git says the commit, and scripts/setup builds the client).
"""

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

ARCH_ENV = "CLOUDRUNNER_WHEEL_ARCH"
COMMIT_ENV = "CLOUDRUNNER_COMMIT"
BUILD_INFO = "cloudrunner/_build_info.py"
#: the recipes `cloudrunner images build` needs, as package data
IMAGE_RECIPES = ("hook-runtime", "egress-proxy")
IMAGES_PACKAGE_DIR = "cloudrunner/_images"
#: the worker image's recipe (its Dockerfile and what its build installs the package from;
#: the package itself comes from the installation: cloudrunner/images/worker_build.py)
WORKER_RECIPE = ("Dockerfile", "pyproject.toml", "README.md", "hatch_build.py",
                 "launcher/cloudrunner")  # fmt: skip

#: wheel architecture (as in platform tags and `uname -m`) -> Go's GOARCH
GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}
#: other names people and tools use for them
ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


class TargetError(Exception):
    """A wheel target that cannot be built as asked."""


@dataclass(frozen=True)
class Target:
    """What kind of wheel to build: `arch` None is the pure wheel (no client)."""

    arch: str | None
    note: str = ""

    @property
    def tag(self) -> str:
        if self.arch is None:
            return "py3-none-any"
        return platform_tag(self.arch)

    @property
    def goarch(self) -> str | None:
        return None if self.arch is None else GOARCH[self.arch]


def platform_tag(arch: str) -> str:
    """The wheel tag of a platform wheel for `arch`: pure Python (py3-none) with a static
    binary, valid on any glibc Linux pip knows (manylinux2014 = manylinux_2_17)."""
    if arch not in GOARCH:
        raise TargetError(f"no client for {arch}: the architectures are {', '.join(GOARCH)}")
    return f"py3-none-manylinux_2_17_{arch}.manylinux2014_{arch}"


def normalise_arch(name: str) -> str:
    name = name.strip().lower()
    return ALIASES.get(name, name)


def choose_target(
    requested: str | None,
    machine: str,
    have_go: bool,
    system: str = "Linux",
    accepts_manylinux: bool = True,
) -> Target:
    """The wheel to build, from `$CLOUDRUNNER_WHEEL_ARCH` (None when unset), this machine's
    architecture and system (`platform.system()`: the client is built for Linux only),
    whether Go is on PATH and whether this interpreter installs manylinux wheels (not on
    musl: `pip install .` there must get a wheel it can install)."""
    if requested is not None and requested.strip():
        arch = normalise_arch(requested)
        if arch == "pure":
            return Target(None)
        if arch not in GOARCH:
            raise TargetError(
                f"{ARCH_ENV}={requested!r} is not a wheel target; use x86_64, aarch64 or pure"
            )
        if not have_go:
            raise TargetError(
                f"{ARCH_ENV}={requested} needs Go to build cloudrunner-hook, and go is not on "
                "PATH; install Go (Debian: golang-go) or set "
                f"{ARCH_ENV}=pure for a wheel without the compiled client"
            )
        return Target(arch)
    arch = normalise_arch(machine)
    pure = "building a pure-Python wheel without cloudrunner-hook (the Python client "
    pure += "`cloudrunner hook` works)"
    if not have_go:
        return Target(None, f"go is not on PATH: {pure}")
    if system != "Linux" or arch not in GOARCH:
        where = (machine if system == "Linux" else f"{system} {machine}").strip()
        where = where or "this machine"
        return Target(None, f"no compiled client for {where}: {pure}")
    if not accepts_manylinux:
        return Target(None, f"this Python does not install manylinux wheels: {pure}")
    return Target(arch)


def accepts_manylinux(arch: str) -> bool:
    """Whether this interpreter installs a manylinux2014 wheel for `arch`."""
    from packaging.tags import sys_tags

    wanted = f"manylinux2014_{normalise_arch(arch)}"
    return any(tag.platform == wanted for tag in sys_tags())


#: what a commit stamp may hold (git's hex, `+dirty`, "unknown"): one word, one line
COMMIT_CHARACTERS = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.+-_")


def check_commit(commit: str) -> str:
    if not (0 < len(commit) <= 64 and set(commit) <= COMMIT_CHARACTERS):
        raise TargetError(
            f"{COMMIT_ENV}={commit!r} is not a commit id (1 to 64 letters, digits, . + - _)"
        )
    return commit


def recipe_files(source: Path) -> list[Path]:
    """The files of an image recipe, without what running Python beside it leaves there."""
    return sorted(
        path
        for path in source.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )


def build_info_source(commit: str) -> str:
    """The text of cloudrunner/_build_info.py."""
    return (
        '"""Written by the build hook (hatch_build.py): the commit this build was made from."""'
        f"\n\nCOMMIT = {commit!r}\n"
    )


def _version_module(root: Path) -> Any:
    spec = importlib.util.spec_from_file_location(
        "_cloudrunner_version", root / "cloudrunner" / "version.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def find_commit(root: Path) -> str:
    """$CLOUDRUNNER_COMMIT, else the sdist's stamp, else git's HEAD, else "unknown"."""
    explicit = os.environ.get(COMMIT_ENV, "").strip()
    if explicit:
        return explicit
    stamped = root / BUILD_INFO
    if stamped.is_file():
        namespace: dict[str, Any] = {}
        exec(stamped.read_text(), namespace)
        return str(namespace["COMMIT"])
    version = _version_module(root)
    return str(version.git_commit(str(root)) or version.UNKNOWN)


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg,unused-ignore]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        root = Path(self.root)
        self._tmp = Path(tempfile.mkdtemp(prefix="cloudrunner-build-"))
        try:
            commit = check_commit(find_commit(root))
        except TargetError as exc:
            sys.exit(f"hatch_build: error: {exc}")
        # always this copy: the one an sdist carries is git-ignored (.gitignore), so the
        # wheel's file selection leaves it out
        info = self._tmp / "_build_info.py"
        info.write_text(build_info_source(commit))
        build_data["force_include"][str(info)] = BUILD_INFO
        if self.target_name != "wheel":
            return
        for name in IMAGE_RECIPES:
            source = root / "images" / name
            if not (source / "Dockerfile").is_file():
                sys.exit(f"hatch_build: error: {source}/Dockerfile is missing; the wheel "
                         "needs the image recipes")  # fmt: skip
            for path in recipe_files(source):
                relative = path.relative_to(source).as_posix()
                build_data["force_include"][str(path)] = f"{IMAGES_PACKAGE_DIR}/{name}/{relative}"
        for name in WORKER_RECIPE:
            if not (root / name).is_file():
                sys.exit(f"hatch_build: error: {root / name} is missing; the wheel needs the "
                         "worker image's recipe")  # fmt: skip
            build_data["force_include"][str(root / name)] = f"{IMAGES_PACKAGE_DIR}/worker/{name}"
        try:
            target = choose_target(
                os.environ.get(ARCH_ENV), platform.machine(), shutil.which("go") is not None,
                platform.system(), accepts_manylinux(platform.machine()),
            )  # fmt: skip
        except TargetError as exc:
            sys.exit(f"hatch_build: error: {exc}")
        if target.note:
            self.app.display_warning(f"cloudrunner wheel: {target.note}")
        build_data["tag"] = target.tag
        if target.goarch is None:
            return
        build_data["pure_python"] = False
        binary = self._tmp / "cloudrunner-hook"
        env = {**os.environ, "CLOUDRUNNER_VERSION": self.metadata.version, COMMIT_ENV: commit}
        done = subprocess.run(
            ["bash", str(root / "client" / "build"), "--arch", target.goarch, str(binary)],
            env=env, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            sys.exit(f"hatch_build: error: client/build --arch {target.goarch} failed")
        build_data["shared_scripts"][str(binary)] = "cloudrunner-hook"
        self.app.display_info(f"cloudrunner wheel: {target.tag} with cloudrunner-hook")

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
