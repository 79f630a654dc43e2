"""What a sandbox container is made of: its mounts, user, labels and command.

Pure functions of the `SandboxSpec` (plus one stat of the workspace), so the hardening
checks in `hardening` compare the engine's read-back against one plain description.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from cloudrunner.sandbox.agent_files import AGENT_FILES
from cloudrunner.sandbox.base import (
    HOOK_HOME,
    HOST_LABEL,
    ISOLATION_LABEL,
    PID_LABEL,
    PROCESS_START_LABEL,
    SESSION_LABEL,
    SOURCE_LABEL,
    WORKER_LABEL,
    SandboxConfigError,
    SandboxSpec,
)
from cloudrunner.sandbox.limits import FALLBACK_HOOK_UID, SandboxLimits, SandboxProfile
from cloudrunner.sandbox.owner import checkout_owner
from cloudrunner.workspace import real_path

#: where the agent's two files are mounted; a namespace package, so no __init__ needed
AGENT_ROOT = "/opt/cloudrunner"
#: capabilities the session agent keeps in its bounding set, and why (see agent.py)
AGENT_CAPS: dict[str, str] = {
    "SETUID": "the agent (uid 0) drops each hook to the unprivileged hook uid",
    "SETGID": "the agent sets the hook's gid and clears its supplementary groups",
    "KILL": "the agent kills the hook's processes, which run as another uid",
}


@dataclass(frozen=True, slots=True)
class Mount:
    source: str
    target: str
    read_only: bool


@dataclass(frozen=True)
class ContainerPlan:
    image: str
    runtime: str
    #: "uid:gid" of the container's first process
    user: str
    command: list[str]
    entrypoint: list[str] | None
    env: dict[str, str]
    working_dir: str | None
    mounts: tuple[Mount, ...]
    limits: SandboxLimits
    network: str
    labels: dict[str, str]
    name: str
    cap_add: tuple[str, ...] = ()
    stdin_open: bool = True
    #: the uid:gid hooks run as (the container user in hook mode, the agent's target in
    #: session mode)
    hook_user: str = field(default="")


def hook_identity(spec: SandboxSpec) -> tuple[int, int]:
    """uid, gid for hooks: the profile's, else the workspace owner's, never 0."""
    return identity_for(spec.profile, spec.workspace)


def identity_for(profile: SandboxProfile, workspace: Path) -> tuple[int, int]:
    """uid, gid hooks of `profile` run as in `workspace`: the profile's, else the
    checkout owner's (`owner.checkout_owner`), never 0 (FALLBACK_HOOK_UID instead)."""
    try:
        owner_uid, owner_gid = checkout_owner(workspace)
    except OSError as exc:
        raise SandboxConfigError(
            f"cannot read the workspace {workspace}: {exc.strerror}; "
            "give the sandbox an existing directory"
        ) from exc
    uid = profile.user if profile.user is not None else owner_uid
    gid = profile.group if profile.group is not None else owner_gid
    if uid == 0:
        uid = FALLBACK_HOOK_UID
    if gid == 0:
        gid = FALLBACK_HOOK_UID
    return uid, gid


def validate_spec(spec: SandboxSpec) -> None:
    """Refuse a spec whose paths would make Docker invent directories or mount nonsense."""
    for label, path in [("workspace", spec.workspace)] + [
        ("config directory", p) for p in spec.config_dirs
    ]:
        if not path.is_absolute():
            raise SandboxConfigError(f"the {label} {path} is not an absolute path")
        if not path.is_dir():
            raise SandboxConfigError(
                f"the {label} {path} does not exist or is not a directory; "
                "the sandbox mounts it at the same path and will not create it"
            )
        real = real_path(path)
        if real != str(path):
            # The engine would follow the link when it mounts, and mount whatever it leads
            # to now: a workspace swapped for a link after it was resolved must not become
            # another directory, read-write, for hooks running as that directory's owner.
            raise SandboxConfigError(
                f"the {label} {path} is not its own real path (it leads to {real}); the "
                "sandbox mounts only a resolved directory, and refuses one that changed "
                "into a symlink since it was resolved"
            )
    if spec.home is not None and (not spec.home.is_absolute() or not spec.home.is_dir()):
        raise SandboxConfigError(
            f"the hook HOME {spec.home} is not an existing directory given by absolute path"
        )
    if spec.transcript is not None and (
        not spec.transcript.is_absolute() or not spec.transcript.is_file()
    ):
        raise SandboxConfigError(
            f"the transcript {spec.transcript} is not an existing file given by absolute path"
        )
    for value, what in ((spec.labels.worker, "worker"), (spec.labels.session, "session")):
        if not value:
            raise SandboxConfigError(f"the sandbox's {what} label is empty")


def data_mounts(spec: SandboxSpec) -> tuple[Mount, ...]:
    """The workspace and the config directories, each at its host path (real path), and
    the hooks' HOME at `HOOK_HOME`."""
    workspace = real_path(spec.workspace)
    mounts = [Mount(workspace, workspace, spec.profile.workspace_mode == "ro")]
    seen = {workspace}
    for directory in spec.config_dirs:
        real = real_path(directory)
        if real in seen or _inside(real, workspace):
            # Already visible through the workspace; a second, read-only mount on a path
            # inside it would shadow the workspace's own files there.
            continue
        seen.add(real)
        mounts.append(Mount(real, real, True))
    if spec.home is not None:
        # at a neutral path, as a VM's home directory: its host path would tell every hook
        # where the worker's state directory is
        mounts.append(Mount(real_path(spec.home), HOOK_HOME, False))
    if spec.transcript is not None and not _inside(real_path(spec.transcript), workspace):
        mounts.append(Mount(str(spec.transcript), str(spec.transcript), True))
    return tuple(mounts)


def agent_mounts(source_dir: Path | None = None) -> tuple[Mount, ...]:
    """The agent's files, from `source_dir` (as the engine sees it; see `agent_files`) or,
    when None, from this package's own directory (a worker on the engine's host)."""
    here = source_dir or Path(__file__).resolve().parent
    return tuple(
        Mount(str(here / name), f"{AGENT_ROOT}/cloudrunner/sandbox/{name}", True)
        for name in AGENT_FILES
    )


def cwd_problem(cwd: str, mounts: tuple[Mount, ...]) -> str:
    """Why `cwd` cannot be a hook's working directory, or "" when it can.

    Mounts sit at their host paths, so the host can check the directory itself.
    """
    if not os.path.isabs(cwd):
        return f"the working directory {cwd!r} is not an absolute path"
    real = real_path(cwd)
    if any(_inside(real, m.target) for m in mounts if not m.target.startswith(AGENT_ROOT)):
        return "" if os.path.isdir(real) else f"the working directory {cwd} does not exist"
    if real == "/tmp":
        return ""
    return (
        f"the working directory {cwd} is outside the workspace and the mounted "
        "config directories, so it does not exist in the sandbox"
    )


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def sandbox_labels(spec: SandboxSpec, isolation: str) -> dict[str, str]:
    labels = {
        WORKER_LABEL: spec.labels.worker,
        SESSION_LABEL: spec.labels.session,
        SOURCE_LABEL: spec.labels.source,
        ISOLATION_LABEL: isolation,
    }
    labels.update(process_labels())
    return labels


def process_labels() -> dict[str, str]:
    """Who made the container: the reaper's test of whether its worker is gone."""
    return {
        HOST_LABEL: socket.gethostname(),
        PID_LABEL: str(os.getpid()),
        PROCESS_START_LABEL: process_start(os.getpid()) or "",
    }


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None
