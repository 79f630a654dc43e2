"""Where commands run: a `SandboxProvider` opens (or borrows) the sandbox of one source for
an event, and opens a sandbox of its own for a spec (the environment's install command).
It is the one place sandboxes are opened. `EngineSandboxes` is the real one, over the
container engine and the warm pool; tests give the pipeline a provider of their own, with
no engine."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cloudrunner import workspace
from cloudrunner.egress import Egress
from cloudrunner.event import transcript
from cloudrunner.event.engine_access import Engine
from cloudrunner.event.homes import Home
from cloudrunner.event.sandbox_profiles import SandboxProfiles
from cloudrunner.event.workspaces import Workspaces
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sandbox import agent_files
from cloudrunner.sandbox.base import Sandbox, SandboxConfigError, SandboxLabels, SandboxSpec
from cloudrunner.sandbox.container_plan import identity_for
from cloudrunner.sandbox.factory import open_sandbox
from cloudrunner.sandbox.session_pool import SessionPool


@dataclass(frozen=True)
class SandboxRequest:
    """One source's sandbox for one event."""

    kind: SourceKind
    working_dir: Path
    workspace: workspace.Workspace
    session: str
    transcript: transcript.Transcript | None = None
    home: Home | None = None
    #: the repository's environment image for project hooks (None: the profile's image)
    image: str | None = None


class SandboxProvider(Protocol):
    @property
    def warm(self) -> bool:
        """True when sandboxes are borrowed warm (worth opening the first one while the
        event's first record syncs)."""
        ...

    def open(self, request: SandboxRequest) -> Sandbox:
        """The sandbox, or the error that fails the hooks that needed it."""
        ...

    def open_spec(self, spec: SandboxSpec) -> Sandbox:
        """A sandbox of its own for `spec` (never a borrowed one), which the caller closes;
        or the error that says why it cannot be opened."""
        ...


@dataclass(frozen=True, eq=False)
class EngineSandboxes:
    """Sandboxes on the container engine: borrowed from the warm pool (session isolation
    with a pool) or opened for the event."""

    state_dir: Path
    profiles: SandboxProfiles
    workspaces: Workspaces
    egress: Egress
    engine: Engine
    pool: SessionPool | None

    @property
    def warm(self) -> bool:
        return self.pool is not None

    def open(self, request: SandboxRequest) -> Sandbox:
        kind, ws = request.kind, request.workspace
        network = self.egress.network_for(kind, request.session)
        profile = self.profiles.for_open(kind, network, request.image)
        uid, gid = identity_for(profile, ws.root)
        access = self.workspaces.access(ws.root)
        if (
            profile.runtime == "runsc"
            and profile.workspace_mode == "rw"
            and access is not None
            and access.mechanism == "acl"
            and uid in access.uids
        ):
            raise SandboxConfigError(
                f"gVisor (runtime runsc) does not apply the host's POSIX ACLs, so {kind} hooks "
                f"(uid {uid}) cannot write the workspace {ws.root}, which belongs to uid "
                f"{access.owner}; run them with runtime runc, hand the checkout to them "
                f"(chown -R {uid}:{gid} {ws.root}), or set sandbox.user to the owner's uid "
                "when it is not 0"
            )
        prepared = request.home
        if prepared is not None and prepared.error is not None:
            raise prepared.error  # over its size limit: this source's hooks do not run
        home = prepared.path if prepared is not None else None
        working_dir = request.working_dir
        config_dirs = () if _inside(working_dir, ws.root) else (working_dir,)
        # The state directory is where the engine sees it, the package may not be (a worker
        # in a container), so session agents mount their files from a staged copy there.
        agent_dir = agent_files.stage(self.state_dir) if profile.isolation == "session" else None
        spec = SandboxSpec(
            workspace=ws.root,
            labels=SandboxLabels(
                worker=self.engine.worker_id, session=request.session, source=kind.value
            ),
            profile=profile,
            config_dirs=config_dirs,
            agent_dir=agent_dir,
            home=home,
            transcript=request.transcript.mount if request.transcript is not None else None,
            on_start=self.egress.bind if network is not None else None,
        )
        if self.pool is not None and profile.isolation == "session":
            return self.pool.borrow(spec)
        return self.open_spec(spec)

    def open_spec(self, spec: SandboxSpec) -> Sandbox:
        self.engine.client()  # connects (and reaps, the first time), or fails the opener
        return open_sandbox(spec, self.engine.link)


def _inside(path: Path, root: Path) -> bool:
    if path == root:  # the project source's hooks, on every event: no need to resolve
        return True
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True
