"""The repository's cloud environment: `.cursor/environment.json` and the image it describes.

Hooks of a repository expect the tools of its cloud agent environment (spec section 7). This
module reads `.cursor/environment.json` (JSON with comments, as Cursor's schema allows) and,
when the worker is configured for it, builds the image from `build.dockerfile` and
`build.context` (both relative to `.cursor/`) through the docker SDK. Like the runtime
images, the image carries a build key label: a hash of the Dockerfile, of every file of the
build context docker would be sent (after `.dockerignore`) and of the base images it names,
so an unchanged environment is never rebuilt.

The `install` command is not run here: the runner runs it once, in the built image and the
workspace, through the sandbox, before the first hook (see README.md).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import docker
import docker.errors
import docker.utils.build
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cloudrunner.errors import CloudrunnerError
from cloudrunner.images.build import BUILD_KEY_LABEL, build_labelled
from cloudrunner.workspace import RepoFileRefused, open_inside, read_inside

ENVIRONMENT_FILE = Path(".cursor") / "environment.json"
IMAGE_REPOSITORY = "cloudrunner/environment"
KIND_LABEL = "cloudrunner.kind"
KIND_VALUE = "environment"
SOURCE_LABEL = "cloudrunner.environment.file"
# Bumped whenever what goes into the key changes, so old images are not mistaken for new.
RECIPE = "environment-image-v1"
MAX_ENVIRONMENT_FILE_BYTES = 1024 * 1024
#: a .dockerignore or Dockerfile larger than this is not a real one
MAX_BUILD_FILE_BYTES = 4 * 1024 * 1024

Progress = Callable[[str], None]


class EnvironmentFileError(CloudrunnerError):
    """`.cursor/environment.json` is unreadable, not JSON, or has wrong types or paths."""


class EnvironmentBuildError(CloudrunnerError):
    """The environment image could not be built; nothing was tagged."""


# --------------------------------------------------------------------------- model


class BuildSpec(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    dockerfile: str
    #: relative to `.cursor/`; Cursor's schema leaves the default open: the folder of
    #: environment.json, as devcontainer.json does.
    context: str = "."


class EnvironmentConfig(BaseModel):
    """The keys of Cursor's environment schema; unknown keys are kept and warned about."""

    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)

    name: str | None = None
    user: str | None = None
    install: str | None = None
    start: str | None = None
    snapshot: str | None = None
    build: BuildSpec | None = None
    terminals: list[Any] = Field(default_factory=list)
    ports: list[Any] = Field(default_factory=list)
    repository_dependencies: list[str] = Field(default_factory=list, alias="repositoryDependencies")
    agent_can_update_snapshot: bool | None = Field(default=None, alias="agentCanUpdateSnapshot")


@dataclass(frozen=True)
class ProjectEnvironment:
    """A parsed environment.json of one workspace, with the warnings it raised."""

    path: Path
    workspace_root: Path
    config: EnvironmentConfig
    warnings: tuple[str, ...]
    #: sha256 of the bytes the config was parsed from (read once, inside the workspace)
    sha256: str = ""

    @property
    def install(self) -> str | None:
        """The `install` command line, for the runner to run before the first hook."""
        text = self.config.install
        return text if text and text.strip() else None

    def install_argv(self) -> list[str] | None:
        """`install` as the argv the sandbox runs (`/bin/sh -c`, like hooks), or None."""
        return ["/bin/sh", "-c", self.install] if self.install else None

    @property
    def has_build(self) -> bool:
        return self.config.build is not None


def load_environment(workspace_root: Path) -> ProjectEnvironment | None:
    """The workspace's `.cursor/environment.json`, or None when it has none.

    The file must resolve inside the workspace (see `repo_files`): one that leads outside
    is refused without a byte of it being read, so nothing of it reaches a message.
    """
    path = workspace_root / ENVIRONMENT_FILE
    try:
        raw = read_inside(path, workspace_root, max_bytes=MAX_ENVIRONMENT_FILE_BYTES, limit="1 MiB")
    except FileNotFoundError:
        return None
    except RepoFileRefused as exc:
        raise EnvironmentFileError(
            f"{exc.message}; the repository's environment is not used"
        ) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EnvironmentFileError(
            f"{path} is not UTF-8 text (byte {exc.start}); fix the file or remove it"
        ) from None
    config, warnings = parse_environment(text, path=path)
    digest = hashlib.sha256(raw).hexdigest()
    return ProjectEnvironment(path, workspace_root, config, tuple(warnings), digest)


def parse_environment(text: str, *, path: Path) -> tuple[EnvironmentConfig, list[str]]:
    """Parse environment.json text; errors name the file, the line and column or pointer."""
    try:
        data = json.loads(strip_json_comments(text))
    except json.JSONDecodeError as exc:
        raise EnvironmentFileError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); "
            "fix the file or remove it"
        ) from None
    if not isinstance(data, dict):
        raise EnvironmentFileError(
            f"{path}: the top level must be a JSON object, not {type(data).__name__}"
        )
    try:
        config = EnvironmentConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        pointer = "/" + "/".join(str(part) for part in first["loc"])
        raise EnvironmentFileError(
            f"{path}: {pointer}: {first['msg'].lower()} (got {first['input']!r:.60})"
        ) from None
    warnings = [f"{path}: unknown key {key!r} ignored" for key in (config.model_extra or {})]
    if config.build is not None:
        warnings += [
            f"{path}: unknown key 'build/{key}' ignored" for key in config.build.model_extra or {}
        ]
    if config.snapshot and config.build is None:
        warnings.append(
            f"{path}: snapshot {config.snapshot!r} is a Cursor VM snapshot, which cloudrunner "
            "cannot use; hooks run in the worker's image (add build.dockerfile to match)"
        )
    return config, warnings


def strip_json_comments(text: str) -> str:
    """Blank out // and /* */ comments outside strings, keeping every line and column."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
        elif ch == '"':
            in_string = True
            out.append(ch)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end == -1 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end == -1 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        else:
            out.append(ch)
            i += 1
    return "".join(out)


# --------------------------------------------------------------------------- build inputs


@dataclass(frozen=True)
class BuildInputs:
    """Absolute, checked paths of what the image is built from."""

    context: Path
    dockerfile: Path
    #: the repository (resolved) both must lie in
    root: Path

    @property
    def dockerfile_in_context(self) -> str | None:
        """The Dockerfile's path relative to the context, or None when it lies outside it."""
        try:
            return self.dockerfile.relative_to(self.context).as_posix()
        except ValueError:
            return None


def resolve_build(environment: ProjectEnvironment) -> BuildInputs:
    """The context and Dockerfile of `environment`, both required to lie in the workspace.

    A context outside the repository would send the worker's own files to the engine, so
    `..` past the root and symlinks leading out of it are refused.
    """
    build = environment.config.build
    if build is None:
        raise EnvironmentFileError(f"{environment.path}: has no build section")
    root = environment.workspace_root.resolve()
    base = environment.path.parent
    context = _inside(root, base / build.context, environment.path, "/build/context")
    dockerfile = _inside(root, base / build.dockerfile, environment.path, "/build/dockerfile")
    if not context.is_dir():
        raise EnvironmentFileError(
            f"{environment.path}: /build/context: {context} is not a directory"
        )
    if not dockerfile.is_file():
        raise EnvironmentFileError(
            f"{environment.path}: /build/dockerfile: {dockerfile} does not exist"
        )
    return BuildInputs(context, dockerfile, root)


def _inside(root: Path, candidate: Path, source: Path, pointer: str) -> Path:
    resolved = candidate.resolve()
    if resolved != root and root not in resolved.parents:
        raise EnvironmentFileError(
            f"{source}: {pointer}: {resolved} is outside the repository {root}; "
            "environment builds may only use files of the repository"
        )
    return resolved


def _read_build_file(path: Path, root: Path) -> bytes:
    """A Dockerfile or .dockerignore of the build, read only when it is inside `root`."""
    try:
        return read_inside(path, root, max_bytes=MAX_BUILD_FILE_BYTES, limit="4 MiB")
    except FileNotFoundError:
        raise EnvironmentFileError(f"{path} does not exist") from None
    except RepoFileRefused as exc:
        raise EnvironmentFileError(
            f"{exc.message}; environment builds may only use files of the repository"
        ) from None


def context_files(inputs: BuildInputs) -> list[str]:
    """The files of the context docker will be sent, as docker-py selects them."""
    return sorted(
        rel
        for rel in _included(inputs)
        if not (inputs.context / rel).is_dir() or (inputs.context / rel).is_symlink()
    )


def _included(inputs: BuildInputs) -> set[str]:
    """Every path of the context (files, links, directories) `.dockerignore` lets through."""
    ignore = inputs.context / ".dockerignore"
    patterns: list[str] = []
    if ignore.is_file() or ignore.is_symlink():
        text = _read_build_file(ignore, inputs.root).decode("utf-8", errors="replace")
        patterns = [
            line.strip()
            for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")
        ]
    included: set[str] = docker.utils.build.exclude_paths(
        str(inputs.context), patterns, dockerfile=inputs.dockerfile_in_context
    )
    return included


def context_archive(inputs: BuildInputs) -> tuple[IO[bytes], str]:
    """The build context as a tar the engine is sent (an open temporary file at offset 0)
    and the Dockerfile's name in it.

    Only what lies inside the repository goes in: a symlink is stored as a link (never
    followed), and a regular file is read through a descriptor checked to be inside the
    repository (`repo_files.open_inside`), so a file swapped for a symlink to a file of the
    worker host after the listing is refused rather than read. A Dockerfile outside the
    context (but inside the repository) is added under a name of its own.
    """
    archive = tempfile.TemporaryFile()  # noqa: SIM115 (returned open; the caller closes it)
    try:
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for rel in sorted(_included(inputs)):
                _add_to_context(tar, inputs.context / rel, rel, inputs.root)
            name = inputs.dockerfile_in_context
            if name is None:
                data = _read_build_file(inputs.dockerfile, inputs.root)
                name = f".dockerfile.{hashlib.sha256(data).hexdigest()[:16]}"
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
        archive.seek(0)
    except BaseException:
        archive.close()
        raise
    return archive, name


def _add_to_context(tar: tarfile.TarFile, path: Path, name: str, root: Path) -> None:
    info = tar.gettarinfo(str(path), arcname=name)  # lstat: links stay links
    if info is None:  # a socket: docker-py leaves those out too
        return
    if not info.isfile():
        tar.addfile(info)
        return
    try:
        fd = open_inside(path, root)
    except FileNotFoundError:
        raise EnvironmentFileError(f"{path} vanished while the build context was read") from None
    except RepoFileRefused as exc:
        raise EnvironmentFileError(
            f"{exc.message}; environment builds may only use files of the repository"
        ) from None
    with os.fdopen(fd, "rb") as handle:
        info.size = os.fstat(handle.fileno()).st_size
        tar.addfile(info, handle)


_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", re.I | re.M)


def base_images(dockerfile_text: str) -> list[str]:
    """The images named by FROM lines, without references to earlier build stages."""
    stages: set[str] = set()
    refs: list[str] = []
    for match in _FROM.finditer(dockerfile_text):
        ref, alias = match.group(1), match.group(2)
        if ref.lower() not in stages and ref.lower() != "scratch" and ref not in refs:
            refs.append(ref)
        if alias:
            stages.add(alias.lower())
    return refs


def build_key(inputs: BuildInputs, base_ids: Mapping[str, str | None]) -> str:
    """A hash of everything the image is made of: Dockerfile, context files, base images."""
    digest = hashlib.sha256()

    def feed(*parts: str | bytes) -> None:
        for part in parts:
            data = part.encode() if isinstance(part, str) else part
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)

    dockerfile = _read_build_file(inputs.dockerfile, inputs.root)
    feed(RECIPE, dockerfile, inputs.dockerfile_in_context or "<outside>")
    for ref in sorted(base_ids):
        feed("base", ref, base_ids[ref] or "<absent>")
    for rel in context_files(inputs):
        path = inputs.context / rel
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            feed("link", rel, os.readlink(path))
        elif stat.S_ISREG(info.st_mode):
            feed("file", rel, "x" if info.st_mode & 0o111 else "-")
            file_digest = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    file_digest.update(block)
            feed(file_digest.digest())
    return digest.hexdigest()


# --------------------------------------------------------------------------- image


@dataclass(frozen=True)
class EnvironmentImage:
    tag: str
    image_id: str
    key: str
    built: bool


def image_tag(key: str) -> str:
    return f"{IMAGE_REPOSITORY}:{key[:24]}"


def build_image(
    client: docker.DockerClient,
    environment: ProjectEnvironment,
    *,
    labels: Mapping[str, str] | None = None,
    force: bool = False,
    allow_pull: bool = False,
    progress: Progress | None = None,
) -> EnvironmentImage:
    """Build (or reuse) the image `environment` describes and return it.

    An image whose build key matches is reused unless `force`. Base images must already be
    in the engine unless `allow_pull` (no registry is reachable from many workers). Raises
    EnvironmentFileError for a bad file and EnvironmentBuildError for a failed build.
    """
    inputs = resolve_build(environment)
    dockerfile_text = _read_build_file(inputs.dockerfile, inputs.root).decode(
        "utf-8", errors="replace"
    )
    base_ids: dict[str, str | None] = {}
    for ref in base_images(dockerfile_text):
        base_ids[ref] = _image_id(client, ref)
        if base_ids[ref] is None and not allow_pull and "$" not in ref:
            raise EnvironmentBuildError(
                f"base image {ref} named by FROM in {inputs.dockerfile} is not in the Docker "
                "engine; build or load it first (no registry pull is attempted)"
            )
    key = build_key(inputs, base_ids)
    tag = image_tag(key)
    if not force:
        existing = _existing(client, tag)
        if existing is not None and existing.labels.get(BUILD_KEY_LABEL) == key:
            return EnvironmentImage(tag, existing.id, key, built=False)
    all_labels = {
        **(labels or {}),
        BUILD_KEY_LABEL: key,
        KIND_LABEL: KIND_VALUE,
        SOURCE_LABEL: str(environment.path),
    }
    image_id = _run_build(client, inputs, tag, all_labels, progress)
    return EnvironmentImage(tag, image_id, key, built=True)


def _image_id(client: docker.DockerClient, ref: str) -> str | None:
    image = _existing(client, ref)
    return str(image.id) if image is not None else None


def _existing(client: docker.DockerClient, ref: str) -> Any:
    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        raise EnvironmentBuildError(f"the Docker engine could not look up {ref}: {exc}") from None


def _run_build(
    client: docker.DockerClient,
    inputs: BuildInputs,
    tag: str,
    labels: dict[str, str],
    progress: Progress | None,
) -> str:
    archive, dockerfile = context_archive(inputs)
    try:
        return build_labelled(
            client, tag, labels,
            what=f"the environment image from {inputs.dockerfile}",
            error=EnvironmentBuildError, one_line=True, on_step=progress,
            fileobj=archive, custom_context=True, dockerfile=dockerfile,
            # pull=True means "always look for a newer base"; a missing base is pre-checked.
            pull=False,
        )  # fmt: skip
    finally:
        archive.close()
