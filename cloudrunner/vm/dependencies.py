"""What `cloudrunner vm --check` finds missing on the VM besides the agent's hooks file: the
Docker engine, the runtime the sandbox settings ask for (runsc, gVisor), the hook images,
and the compiled per-event client. One line each, naming what to do about it."""

from __future__ import annotations

from pathlib import Path

import docker.errors

from cloudrunner.docker_engine import connect
from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.settings import Settings
from cloudrunner.vm.provisioning import COMPILED_CLIENT, VmSetupError, find_client

#: the source kinds whose hooks run on this VM's engine (the user source never does in a VM)
KINDS = tuple(kind for kind in SourceKind if kind is not SourceKind.USER)


def missing(settings: Settings, client: Path | None = None) -> list[str]:
    """One line for each dependency the daemon or the agent's client lacks here."""
    lines = _client(client)
    try:
        engine = connect(timeout=10)
    except CloudrunnerError as exc:
        return [
            *lines,
            f"the Docker engine: {exc.message}; on Debian: apt-get install docker.io && "
            "systemctl enable --now docker",
        ]
    try:
        lines += _runtimes(engine, settings) + _images(engine, settings)
    except (docker.errors.DockerException, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        lines.append(f"the Docker engine stopped answering ({first})")
    finally:
        engine.close()
    return lines


def _client(explicit: Path | None) -> list[str]:
    try:
        found = find_client(explicit)
    except VmSetupError as exc:
        return [f"the per-event client: {exc.message}"]
    if found.compiled:
        return []
    return [
        f"the compiled client {COMPILED_CLIENT} is neither beside cloudrunner nor on PATH, so "
        "the agent would start a Python interpreter on every event; install the cloudrunner "
        "package (it puts /usr/bin/cloudrunner-hook beside /usr/bin/cloudrunner) or give "
        "--client PATH"
    ]


def _runtimes(engine: docker.DockerClient, settings: Settings) -> list[str]:
    registered = set((engine.info() or {}).get("Runtimes") or {})
    asked = sorted({settings.sandbox.profile_for(kind).runtime for kind in KINDS})
    return [
        f"the sandbox runtime {runtime!r} (sandbox.runtime) is not registered with the Docker "
        "engine"
        + (
            "; install gVisor (apt-get install runsc) and register it as runsc in "
            "/etc/docker/daemon.json, then restart the engine"
            if runtime == "runsc"
            else '; register it in /etc/docker/daemon.json or set sandbox.runtime to "runc"'
        )
        for runtime in asked
        if runtime not in registered
    ]


def _images(engine: docker.DockerClient, settings: Settings) -> list[str]:
    lines = []
    for image in sorted({settings.sandbox.profile_for(kind).image for kind in KINDS}):
        try:
            engine.images.get(image)
        except docker.errors.ImageNotFound:
            lines.append(
                f"the hook image {image} is not on the Docker engine; build it with "
                "`cloudrunner images build`"
            )
    return lines
