"""What a sandbox may use and how it is isolated: `SandboxLimits` and `SandboxProfile`.

Both are pydantic models so the worker's settings (TOML, per source) validate into them
with errors naming the bad key. Sizes accept plain byte counts or strings like "512MiB".
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from cloudrunner.images import DEFAULT_RUNTIME_IMAGE

#: The uid (and gid) hooks run as when the workspace is owned by root: hooks never run as 0.
#: The hook runtime image names it `hook`; any image works, a passwd entry is not needed.
FALLBACK_HOOK_UID = 10001

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

_UNITS = {
    "": 1,
    "b": 1,
    "k": KIB,
    "kb": KIB,
    "kib": KIB,
    "m": MIB,
    "mb": MIB,
    "mib": MIB,
    "g": GIB,
    "gb": GIB,
    "gib": GIB,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: object) -> object:
    """'64MiB' / '64m' / '1.5g' / 4096 -> bytes (binary units: a k is 1024)."""
    if isinstance(value, str):
        match = _SIZE.match(value)
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _UNITS:
            raise ValueError(
                f"{value!r} is not a size; write a byte count or a number with a unit "
                "(k, m, g, KiB, MiB, GiB), e.g. '512MiB'"
            )
        return int(float(match.group(1)) * _UNITS[unit])
    return value


ByteSize = Annotated[int, BeforeValidator(parse_size), Field(gt=0)]

Runtime = Annotated[str, Field(pattern=r"^[a-z][a-z0-9._-]{0,63}$")]
Isolation = Literal["hook", "session"]
WorkspaceMode = Literal["rw", "ro"]


class SandboxLimits(BaseModel):
    """Resource limits applied to every container (and, in session mode, every hook)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: memory limit; swap is set equal to it, so a hook cannot swap past it
    memory: ByteSize = 512 * MIB
    #: CPU quota in cores (a CFS quota over a 100 ms period) of each hook's container in
    #: hook isolation, and of each hook a session container runs at once
    cpus: float = Field(1.0, gt=0, le=256)
    #: CPU quota of a session container (its hooks share it); unset: `cpus` times the
    #: hooks of one source that run at once (max_parallel_hooks), at most the machine's cores
    session_cpus: float | None = Field(None, gt=0, le=256)
    #: pids limit of the container: what stops a fork bomb
    pids: int = Field(256, ge=16, le=1_000_000)
    #: size of the tmpfs mounted at /tmp (the only writable place besides the workspace)
    tmpfs_size: ByteSize = 64 * MIB
    #: RLIMIT_NOFILE (soft = hard)
    nofile: int = Field(1024, ge=64, le=1_048_576)
    #: RLIMIT_FSIZE: the largest file a hook may write (soft = hard)
    fsize: ByteSize = 1 * GIB
    #: bytes of stdout / stderr kept; more is output_overflow and the hook is killed
    stdout_cap: ByteSize = 1 * MIB
    stderr_cap: ByteSize = 1 * MIB
    #: used when a request gives no timeout (the protocol's default: 60 s)
    default_timeout_s: float = Field(60.0, gt=0, le=24 * 3600)


def session_quota(per_hook: float, parallel: int, cores: int, fixed: float | None = None) -> float:
    """The CPU quota (in cores) of a session container whose `parallel` hooks may run at
    once, each meant to get `per_hook` cores: enough for all of them, never more than the
    machine has (nor less than one hook's share); `fixed` (session_cpus) overrides."""
    if fixed is not None:
        return fixed
    wanted = per_hook * max(1, parallel)
    return max(per_hook, min(wanted, float(max(1, cores))))


def machine_cores() -> int:
    """The cores this process may run on (its affinity mask, which a CPU set narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class SandboxProfile(BaseModel):
    """How hooks of one source are isolated. Settable per source by the worker's settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the image hooks run in (built locally by `cloudrunner images build`)
    image: str = Field(DEFAULT_RUNTIME_IMAGE, min_length=1)
    #: an OCI runtime registered with the engine: "runc" (default) or "runsc" (gVisor)
    runtime: Runtime = "runc"
    #: "hook": a fresh container per hook run; "session": one warm container per
    #: (session, source) with the in-container agent (needs python3 in the image)
    isolation: Isolation = "session"
    #: when the image has no python3, run session-isolated hooks in hook mode instead
    #: (recorded in every result's attestation and message, never silent); off by default
    fallback_to_hook: bool = False
    #: "none", or the name of a Docker network the operator allows (enterprise/team only)
    network: str = Field("none", min_length=1)
    #: how the workspace is mounted: "rw" (read-write) or "ro" (read-only)
    workspace_mode: WorkspaceMode = "rw"
    #: uid/gid the hooks run as; default: the owner of the workspace (never 0)
    user: int | None = Field(None, ge=1, le=2**31 - 1)
    group: int | None = Field(None, ge=1, le=2**31 - 1)
    limits: SandboxLimits = SandboxLimits()

    @field_validator("user", "group", mode="before")
    @classmethod
    def _never_root(cls, value: object) -> object:
        if value == 0:
            raise ValueError(
                "hooks never run as uid/gid 0; leave it unset (the workspace owner, or "
                f"{FALLBACK_HOOK_UID} when root owns it) or name an unprivileged id"
            )
        return value

    @field_validator("network")
    @classmethod
    def _no_host_namespaces(cls, value: str) -> str:
        if value == "host" or value.startswith("container:"):
            raise ValueError(
                f"network {value!r} would share a namespace outside the sandbox; "
                "use 'none' or the name of a Docker network"
            )
        return value
