"""The worker: the event path's parts, put together for one settings object.

What an event goes through is `cloudrunner.event.pipeline`; this module makes its stages
(workspaces, homes, environment images, sandboxes, all over one set of sandbox profiles and
one engine connection; the sandbox provider opens the hooks' sandboxes and the environment's
install sandbox alike) and hands them to it. Expected failures (a bad payload, a non-cloud
event, a missing repository) are recorded as `refused` and raised as `CloudrunnerError`s
for the CLI's error boundary; a hook's failure is an outcome, never an exception.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import docker

from cloudrunner import workspace
from cloudrunner.audit import AuditWriter, TornAcknowledgement
from cloudrunner.closing import ClosesOnExit
from cloudrunner.egress import Egress
from cloudrunner.event import (
    AUDIT_UNWRITABLE_EXIT,
    Engine,
    EngineSandboxes,
    EnvironmentImages,
    EventNotRecorded,
    EventPipeline,
    EventReply,
    Homes,
    PayloadRefused,
    Refusal,
    SandboxProfiles,
    SandboxProvider,
    SessionStore,
    Workspaces,
    reap_orphans,
)
from cloudrunner.logs import get_logger
from cloudrunner.protocol.profiles import Profile
from cloudrunner.refusals import ErrorCode
from cloudrunner.sandbox.engine import EngineLink
from cloudrunner.sandbox.session_pool import SessionPool
from cloudrunner.settings import Settings, source_settings
from cloudrunner.sources import SourceSet, load_sources

__all__ = [
    "AUDIT_UNWRITABLE_EXIT",
    "EventNotRecorded",
    "EventReply",
    "PayloadRefused",
    "Worker",
    "open_audit",
    "open_egress",
    "reap_orphans",
]


class Worker(ClosesOnExit):
    """Answers events for one settings object; `close()` releases the audit log."""

    def __init__(
        self,
        settings: Settings,
        *,
        client: docker.DockerClient | EngineLink | None = None,
        audit: AuditWriter | None = None,
        pool: SessionPool | None = None,
        gate_dir: Path | None = None,
        reap: bool = True,
        home_root: Path | None = None,
        egress: Egress | None = None,
        on_sources: Callable[[Path, SourceSet], None] | None = None,
        sandboxes: SandboxProvider | None = None,
    ) -> None:
        """`audit`, `pool` and `client` are shared when given (the daemon runs one worker per
        workspace over one audit log, one engine connection and one warm-sandbox pool) and
        are then not closed by `close()`; `gate_dir` holds this worker's gate state
        (default: the state directory); `reap` removes orphaned sandboxes on the first
        engine connection (the daemon does that once, at start); `home_root` holds the
        hooks' homes (default: <state_dir>/homes); `egress` is shared like `audit` (one
        proxy, one access-log reader per process, so each attempt is recorded once);
        `on_sources` is told each workspace's sources as an event loads them (the daemon's
        fail policy); `sandboxes` replaces the engine's sandboxes (tests)."""
        self.settings = settings
        self.worker_id = settings.effective_worker_id
        self.profile = Profile(settings.profile)
        self.sessions = SessionStore(settings.state_dir)
        self.gate_dir = gate_dir or settings.state_dir
        self.home_root = home_root or settings.state_dir / "homes"
        self._pool = pool
        link = client if isinstance(client, EngineLink) else EngineLink(client)
        self._owns_audit = audit is None
        self.audit = audit or open_audit(settings)
        self.egress = egress or open_egress(settings, link)
        profiles = SandboxProfiles(settings)
        engine = Engine(link, self.worker_id, self.audit, reap=reap)
        self._workspaces = Workspaces(settings, profiles, self.gate_dir)
        if sandboxes is None:
            sandboxes = EngineSandboxes(
                state_dir=settings.state_dir,
                profiles=profiles,
                workspaces=self._workspaces,
                egress=self.egress,
                engine=engine,
                pool=pool,
            )
        self.pipeline = EventPipeline(
            settings,
            audit=self.audit,
            sessions=self.sessions,
            workspaces=self._workspaces,
            homes=Homes(settings.home, profiles, self.home_root),
            environments=EnvironmentImages(settings, profiles, engine, sandboxes, self.audit),
            sandboxes=sandboxes,
            egress=self.egress,
            on_sources=on_sources,
        )

    def close(self) -> None:
        if self._owns_audit:
            self.audit.close()

    def handle(self, payload: bytes, event: str | None = None) -> EventReply:
        return self.pipeline.handle(payload, event)

    def refuse(self, event: str, reason: str, code: ErrorCode) -> NoReturn:
        """Record a `refused` event whose payload was never read, and raise PayloadRefused."""
        self.pipeline.refuse(event, {}, Refusal(reason, code))

    def workspaces(self) -> list[workspace.Workspace]:
        """The checkouts this worker has resolved so far."""
        return self._workspaces.all()

    def startup_sources(self) -> tuple[Path | None, SourceSet]:
        """The sources this worker serves before any event names a workspace (for the fail
        policy the daemon publishes at start): the configured workspace's, when it is a
        checkout already there (`--workspace`, or a `--repo` clone made before), else the
        operator's sources alone. Nothing is cloned and nothing recorded."""
        root, trusted = self._workspaces.startup()
        return root, load_sources(source_settings(self.settings, root, trusted))


def open_egress(settings: Settings, link: EngineLink) -> Egress:
    """The egress manager the settings describe (its proxy starts on first need)."""
    return Egress(
        settings.egress,
        client=link.client,
        state_dir=settings.state_dir,
        worker_id=settings.effective_worker_id,
        rules_file=settings.egress.rules_file,
        default_networks=lambda kind: settings.sandbox.profile_for(kind).network,
    )


def open_audit(settings: Settings) -> AuditWriter:
    """The audit writer the settings describe."""
    return AuditWriter(
        settings.audit_path,
        worker=settings.effective_worker_id,
        fsync=settings.audit.fsync,
        fsync_interval=settings.audit.fsync_interval,
        max_bytes=settings.audit.max_bytes,
        include_payload_text=settings.audit.include_payload_text,
        excerpt_cap=settings.audit.excerpt_bytes,
        on_torn=_report_torn,
    )


def _report_torn(ack: TornAcknowledgement) -> None:
    # the operational log (stderr), never stdout: the agent's answer stays clean
    get_logger("cloudrunner.worker").warning("worker.audit_torn", problem=ack.message())
