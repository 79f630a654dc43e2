"""Building the worker's image (`cloudrunner images worker`, which scripts/build-worker-image
runs) from what is installed: no checkout needed.

The recipe is the worker's Dockerfile and what its build stage installs the package from
(pyproject.toml, README.md, the build hook, the launcher): the checkout's root, or, in an
installed wheel, `cloudrunner/_images/worker/` (hatch_build.py puts them there). The build
context is assembled in a temporary directory from the recipe, this package's own files,
the image recipes and the compiled client, plus a wheelhouse of the dependencies made on the
host (`pip wheel`), so the image installs with no registry (HTTPS to package registries may
fail inside containers).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import docker
import docker.errors

from cloudrunner import __version__
from cloudrunner.docker_engine import connect
from cloudrunner.images.build import (
    BASE_IMAGE,
    PACKAGED_IMAGES,
    RECIPE_FILES,
    RECIPES,
    REVISION_LABEL,
    WORKER_REPOSITORY,
    ImageBuildError,
    images_dir,
    progress,
    recipe_dir,
    run_build,
    version_labels,
)

COMPILED_CLIENT = "cloudrunner-hook"


def default_client() -> Path | None:
    """The compiled client beside this interpreter's `cloudrunner`, if there is one."""
    candidate = Path(sys.executable).parent / COMPILED_CLIENT
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def assemble(context: Path, client: Path) -> None:
    """The build context, without the wheelhouse: the recipe, the package, the image recipes
    and the client at build/cloudrunner-hook."""
    recipe = recipe_dir()
    for name in RECIPE_FILES:
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(recipe / name, context / name)
    package = Path(__file__).resolve().parents[1]
    shutil.copytree(
        package, context / "cloudrunner",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", PACKAGED_IMAGES),
    )  # fmt: skip
    images = images_dir()
    for name in RECIPES:
        shutil.copytree(images / name, context / "images" / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
    (context / "build").mkdir()
    shutil.copy2(client, context / "build" / COMPILED_CLIENT)


def fill_wheelhouse(context: Path, commit: str) -> None:
    """Wheels of every dependency and of the build backend in build/wheelhouse/ (this
    package's own wheel is built inside the image, so it is left out)."""
    wheelhouse = context / "build" / "wheelhouse"
    wheelhouse.mkdir(parents=True)
    with (context / "pyproject.toml").open("rb") as f:
        backend = list(tomllib.load(f)["build-system"]["requires"])
    progress("pip wheel: the dependencies and the build backend, for an offline image build")
    env = {**os.environ, "CLOUDRUNNER_WHEEL_ARCH": "pure", "CLOUDRUNNER_COMMIT": commit}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
         "-w", str(wheelhouse), str(context), *backend],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-10:])
        raise ImageBuildError(
            f"pip wheel of the worker's dependencies failed (exit {proc.returncode}); "
            f"nothing was tagged. Last output:\n{tail}"
        )
    for own in wheelhouse.glob("cloudrunner-*.whl"):
        own.unlink()


def build_worker(
    *, tag: str | None = None, client: Path | None = None, base: str = BASE_IMAGE
) -> str:
    """Build the worker image as `cloudrunner/worker:<version>` and `:latest`, or only as
    `tag`; its image id."""
    chosen = client or default_client()
    if chosen is None:
        raise ImageBuildError(
            f"the worker image carries the compiled client, and there is no {COMPILED_CLIENT} "
            f"beside {sys.executable} (a wheel built without Go); give --client PATH, or "
            "install the platform wheel"
        )
    if not (chosen.is_file() and os.access(chosen, os.X_OK)):
        raise ImageBuildError(f"--client {chosen} is not an executable file")
    labels = version_labels()
    refs = [tag] if tag else [f"{WORKER_REPOSITORY}:{__version__}", f"{WORKER_REPOSITORY}:latest"]
    with tempfile.TemporaryDirectory(prefix="cloudrunner-worker-") as tmp:
        context = Path(tmp)
        assemble(context, chosen)
        fill_wheelhouse(context, labels[REVISION_LABEL])
        client_api = connect()
        try:
            if base == BASE_IMAGE:
                try:
                    client_api.images.get(BASE_IMAGE)
                except docker.errors.ImageNotFound:
                    raise ImageBuildError(
                        f"{BASE_IMAGE} is missing; run `cloudrunner images build` first"
                    ) from None
            progress(f"building {refs[0]}")
            image_id = run_build(
                client_api, context, refs[0],
                buildargs={"BASE_IMAGE": base, "CLOUDRUNNER_COMMIT": labels[REVISION_LABEL]},
                labels=labels,
            )  # fmt: skip
            for ref in refs[1:]:
                repository, _, name = ref.rpartition(":")
                client_api.images.get(image_id).tag(repository, name)
        finally:
            client_api.close()
    progress(f"tagged {' and '.join(refs)}")
    return image_id
