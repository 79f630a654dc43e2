"""The session agent's files, copied where the Docker engine can see them.

A session sandbox bind-mounts `agent.py` and `framing.py` into its container. The engine
resolves a bind mount's source on *its* host, so the package's own directory only works for
a worker running on that host. A worker in a container (the worker image, beside the host's
socket or a Docker-in-Docker sidecar) has its package where the engine cannot see it, but
its state directory is at the same path on both sides (the deployment requires it for the
workspaces). So the files are staged in `<state_dir>/sandbox-agent/<digest>/`, named by a
digest of their content: written once, atomically, never changed afterwards, and a worker
of another version uses another directory.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from cloudrunner.sandbox.base import SandboxConfigError

#: the files the agent imports, relative to the package's sandbox directory
AGENT_FILES = ("agent.py", "framing.py")
STAGE_DIR = "sandbox-agent"

_SOURCE_DIR = Path(__file__).resolve().parent


def digest(source_dir: Path = _SOURCE_DIR) -> str:
    """A digest of the agent's files (names and contents)."""
    hasher = hashlib.sha256()
    for name in AGENT_FILES:
        data = (source_dir / name).read_bytes()
        hasher.update(f"{name}\0{len(data)}\0".encode())
        hasher.update(data)
    return hasher.hexdigest()[:16]


_staged: dict[tuple[Path, Path], Path] = {}


def stage(state_dir: Path, source_dir: Path = _SOURCE_DIR) -> Path:
    """`_stage`, once per process for a state directory (a daemon asks on every event)."""
    key = (state_dir, source_dir)
    found = _staged.get(key)
    if found is None or not all((found / name).is_file() for name in AGENT_FILES):
        found = _staged[key] = _stage(state_dir, source_dir)
    return found


def _stage(state_dir: Path, source_dir: Path) -> Path:
    """The directory under `state_dir` holding this package's agent files (made if needed).

    The files are world-readable (0644) and their directories searchable (0755): the agent
    runs as uid 0 without CAP_DAC_OVERRIDE, so it reads them by their mode bits alone.
    """
    # the real path: the engine's read-back of a bind mount names its resolved source
    target = Path(os.path.realpath(state_dir)) / STAGE_DIR / digest(source_dir)
    if all((target / name).is_file() for name in AGENT_FILES):
        return target
    try:
        target.mkdir(parents=True, exist_ok=True)
        for directory in (target.parent, target):
            directory.chmod(0o755)
        for name in AGENT_FILES:
            destination = target / name
            if destination.is_file():
                continue
            handle, temporary = tempfile.mkstemp(dir=target, prefix=f".{name}.")
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write((source_dir / name).read_bytes())
                os.chmod(temporary, 0o644)
                os.replace(temporary, destination)  # atomic: a reader sees all or nothing
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
    except OSError as exc:
        raise SandboxConfigError(
            f"cannot stage the session agent's files in {target}: {exc.strerror or exc}; "
            "the state directory must be writable by the worker (or use isolation `hook`)"
        ) from None
    return target
