"""The sandbox's link to the Docker engine, and docker errors turned into fixes.

The link connects lazily and reconnects after a failure, so a sandbox can be opened while
the engine is down and answers each run with a sandbox_error naming the fix instead of
raising.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import docker
import docker.errors

from cloudrunner.docker_engine import EngineUnavailable, connect

ENGINE_FIX = "start it with `bash scripts/docker-up` (or point DOCKER_HOST at a running engine)"


class EngineLink:
    """A docker client made on first use and shared by every thread of the sandbox."""

    def __init__(self, client: docker.DockerClient | Callable[[], docker.DockerClient] | None):
        self._lock = threading.Lock()
        self._factory: Callable[[], docker.DockerClient] = connect
        self._client: docker.DockerClient | None = None
        if isinstance(client, docker.DockerClient):
            self._client = client
        elif client is not None:
            self._factory = client

    def client(self) -> docker.DockerClient:
        """The client; raises EngineUnavailable (naming the fix) when no engine answers."""
        with self._lock:
            if self._client is None:
                try:
                    self._client = self._factory()
                except docker.errors.DockerException as exc:
                    raise EngineUnavailable(
                        f"the Docker engine does not answer ({_first_line(exc)}); {ENGINE_FIX}"
                    ) from exc
            return self._client


def runtime_network_problem(client: docker.DockerClient, runtime: str, network: str) -> str:
    """Why `network` would silently not work under `runtime` here, or "".

    gVisor registered with --network=none (as `scripts/docker-up` does) gives its
    containers no network whatever Docker attaches: a networked source would quietly lose
    its network, so that combination is refused.
    """
    if network == "none" or runtime != "runsc":
        return ""
    runtimes = (client.info() or {}).get("Runtimes") or {}
    args = (runtimes.get(runtime) or {}).get("runtimeArgs") or []
    if "--network=none" in args:
        return (
            f"runtime runsc is registered with --network=none on this engine, so network "
            f'{network!r} would be silently absent; use runtime "runc" for this source or '
            'set its network to "none"'
        )
    return ""


def describe(exc: BaseException, *, image: str, runtime: str, network: str) -> str:
    """What went wrong talking to the engine, and what to do about it."""
    text = _first_line(exc)
    lowered = str(exc).lower()
    if isinstance(exc, EngineUnavailable):
        return exc.message
    if isinstance(exc, docker.errors.ImageNotFound) or (
        "no such image" in lowered and image.lower() in lowered
    ):
        return (
            f"image {image} is not on this Docker engine; build it with "
            "`cloudrunner images build` (or set the source's sandbox image to one that exists)"
        )
    if "runtime" in lowered and ("unknown" in lowered or "invalid" in lowered):
        return (
            f"the Docker engine has no runtime named {runtime!r}; `bash scripts/docker-up` "
            "installs gVisor and registers it as runsc (with --network=none), other runtimes "
            'are registered under "runtimes" in /etc/docker/daemon.json; or set the source\'s '
            'sandbox runtime to "runc"'
        )
    if "network" in lowered and "not found" in lowered:
        return (
            f"Docker network {network!r} does not exist; create it "
            '(docker network create NAME) or set the source\'s sandbox network to "none"'
        )
    if isinstance(exc, docker.errors.APIError):
        return f"the Docker engine refused: {text}"
    if isinstance(exc, docker.errors.DockerException | OSError):
        return f"lost the Docker engine ({text}); {ENGINE_FIX}"
    return f"{type(exc).__name__}: {text}"


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__
