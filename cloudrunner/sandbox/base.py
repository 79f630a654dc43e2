"""The `Sandbox` protocol and the values that cross it.

A sandbox runs one hook command per `run()` call and always answers with an `ExecResult`:
a hook's failure, a dead agent or a missing image are outcomes, never exceptions. Only a
caller's own mistake (a workspace that does not exist, a bad profile) raises, when the
sandbox is opened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox.limits import SandboxProfile

WORKER_LABEL = "cloudrunner.worker"
SESSION_LABEL = "cloudrunner.session"
SOURCE_LABEL = "cloudrunner.source"
ISOLATION_LABEL = "cloudrunner.isolation"
#: where the creating worker process lives, so the reaper can tell whether it is gone
HOST_LABEL = "cloudrunner.worker-host"
PID_LABEL = "cloudrunner.worker-pid"
PROCESS_START_LABEL = "cloudrunner.worker-start"
#: where a hook's HOME is mounted, as a VM's home directory (never at its host path)
HOOK_HOME = "/home/hook"


class SandboxConfigError(CloudrunnerError):
    """The caller asked for a sandbox that cannot be made (a configuration error)."""


@dataclass(frozen=True, slots=True)
class ExecRequest:
    command: str
    #: an absolute path inside the workspace or a mounted config directory (or /tmp)
    cwd: str
    stdin: bytes = b""
    #: the hook's whole environment on top of the image's own ENV: nothing else leaks
    env: Mapping[str, str] = field(default_factory=dict)
    #: seconds; None = the profile's limits.default_timeout_s
    timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class ExecResult:
    #: the exit status (128+N when killed by signal N, as Docker reports it); None when
    #: the sandbox killed the hook (timeout, output_overflow) or could not run it
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    duration_s: float
    #: ok / error here mean exit 0 / non-zero; the protocol layer classifies further
    outcome: Outcome
    #: why, for every outcome but ok (and for ok after an explicit fallback)
    message: str
    sandbox_id: str
    #: the hardening settings read back from the engine, the image id and the runtime
    attestation: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SandboxLabels:
    worker: str
    session: str
    source: str


@dataclass(frozen=True)
class SandboxSpec:
    """Everything a sandbox is opened with."""

    workspace: Path
    labels: SandboxLabels
    profile: SandboxProfile = field(default_factory=SandboxProfile)
    #: source config directories, mounted read-only at their host paths
    config_dirs: tuple[Path, ...] = ()
    #: where the engine finds the session agent's files (`agent_files.stage`); None: this
    #: package's own directory, which only an engine on the worker's host can see
    agent_dir: Path | None = None
    #: the hooks' HOME (a directory owned by the hook uid), mounted read-write at HOOK_HOME
    home: Path | None = None
    #: the event's transcript file, mounted read-only at its path
    transcript: Path | None = None
    #: told (container id, the run's environment) as each hook run starts in a container:
    #: the egress proxy ties the run's credential to that container's address
    on_start: Callable[[str, Mapping[str, str]], None] | None = field(default=None, compare=False)


class Sandbox(Protocol):
    """One isolation unit: `hook` (a container per run) or `session` (a warm agent)."""

    @property
    def sandbox_id(self) -> str: ...

    def run(self, request: ExecRequest) -> ExecResult:
        """Run one hook; thread-safe; never raises for the hook's or the engine's failure."""
        ...

    def close(self) -> None:
        """Remove every container this sandbox made; idempotent."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
