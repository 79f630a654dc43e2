"""The programs on an image's PATH, listed once per image id in a throwaway container.

`validate` looks up each hook's program here before any event runs. The listing runs the
image's own shell as the image's user with no network, no capabilities and a read-only root,
and is cached under the state directory by image id, so a rebuilt image is listed again.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors

from cloudrunner.errors import CloudrunnerError

CACHE_DIR_NAME = "image-programs"
PURPOSE_LABEL = "cloudrunner.purpose"
WORKER_LABEL = "cloudrunner.worker"
#: one line PATH=..., then one line per executable file in a PATH directory
LIST_SCRIPT = r"""
printf 'PATH=%s\n' "$PATH"
IFS=:
for d in $PATH; do
  [ -d "$d" ] || continue
  for f in "$d"/* "$d"/.[!.]*; do
    [ -f "$f" ] && [ -x "$f" ] && printf '%s\n' "$f"
  done
done
exit 0
"""


class ImageCheckUnavailable(CloudrunnerError):
    """The image could not be listed (no engine, no image): the check is skipped, with why."""


@dataclass(frozen=True)
class ImagePrograms:
    image: str
    image_id: str
    path_dirs: tuple[str, ...]
    #: absolute paths of every executable file in a PATH directory
    programs: frozenset[str]
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "image_id": self.image_id,
            "path_dirs": list(self.path_dirs),
            "programs": sorted(self.programs),
        }


def parse_listing(image: str, image_id: str, text: str) -> ImagePrograms:
    lines = text.splitlines()
    path_dirs: tuple[str, ...] = ()
    programs: set[str] = set()
    for line in lines:
        if line.startswith("PATH="):
            path_dirs = tuple(d for d in line[5:].split(":") if d)
        elif line.startswith("/"):
            programs.add(line)
    return ImagePrograms(image, image_id, path_dirs, frozenset(programs))


def _cache_file(cache_dir: Path, image_id: str) -> Path:
    return cache_dir / f"{image_id.replace('sha256:', '')}.json"


def _read_cache(path: Path, image: str) -> ImagePrograms | None:
    try:
        data = json.loads(path.read_text())
        return ImagePrograms(
            image, str(data["image_id"]), tuple(data["path_dirs"]),
            frozenset(str(p) for p in data["programs"]), cached=True,
        )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(path: Path, listing: ImagePrograms) -> None:
    # the cache only saves a container start; a state directory this user cannot write
    # (validate run as a developer) leaves the check itself intact
    with contextlib.suppress(OSError):
        # only inside a state directory that exists: validate never creates one
        path.parent.mkdir(parents=False, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(listing.to_dict()))
        os.replace(tmp, path)


def list_programs(client: docker.DockerClient, image: str, cache_dir: Path) -> ImagePrograms:
    """The image's PATH programs, from the cache when this image id was listed before."""
    try:
        image_id = str(client.images.get(image).id)
    except docker.errors.ImageNotFound:
        raise ImageCheckUnavailable(
            f"image {image} is not on this Docker engine (build it with `cloudrunner images "
            "build`, or name the image hooks run in with --image)"
        ) from None
    except docker.errors.DockerException as exc:
        raise ImageCheckUnavailable(f"the Docker engine did not answer for {image}: {exc}") from exc
    cache = _cache_file(cache_dir, image_id)
    hit = _read_cache(cache, image)
    if hit is not None and hit.image_id == image_id:
        return hit
    labels = {
        PURPOSE_LABEL: "validate-image-programs",
        WORKER_LABEL: os.environ.get("CLOUDRUNNER_WORKER_ID", f"validate-{os.getpid()}"),
    }
    container = None
    try:
        container = client.containers.create(
            image, ["sh", "-c", LIST_SCRIPT], labels=labels, network_disabled=True,
            network_mode="none", read_only=True, cap_drop=["ALL"],
            security_opt=["no-new-privileges"], mem_limit="64m", pids_limit=64,
            entrypoint=[],
        )  # fmt: skip
        container.start()
        status = container.wait(timeout=60)
        output = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
    except docker.errors.DockerException as exc:
        raise ImageCheckUnavailable(f"could not list the programs of {image}: {exc}") from exc
    finally:
        if container is not None:
            with contextlib.suppress(docker.errors.DockerException):
                container.remove(force=True)
    listing = parse_listing(image, image_id, output)
    if status.get("StatusCode") != 0 or not listing.path_dirs:
        raise ImageCheckUnavailable(
            f"could not list the programs of {image} (its sh exited {status.get('StatusCode')})"
        )
    _write_cache(cache, listing)
    return listing
