"""The container engine as the event path uses it: connected on first need, and on that
first connection the sandboxes a dead worker left behind removed and recorded; and the
builder of repositories' environment images."""

from __future__ import annotations

import docker

from cloudrunner import images as project_environment
from cloudrunner.audit import AuditWriter, RecordKind
from cloudrunner.event import record_builders
from cloudrunner.logs import get_logger
from cloudrunner.sandbox import reaper
from cloudrunner.sandbox.engine import EngineLink

_log = get_logger("cloudrunner.worker")


class Engine:
    def __init__(self, link: EngineLink, worker_id: str, audit: AuditWriter, *, reap: bool) -> None:
        self.link = link
        self.worker_id = worker_id
        self.audit = audit
        self._reaped = not reap

    def client(self) -> docker.DockerClient:
        """The engine's client (connecting, and reaping the first time), or the error that
        fails the hook that needed it."""
        client = self.link.client()
        if not self._reaped:
            self._reaped = True
            reap_orphans(client, self.worker_id, self.audit)
        return client

    def build_image(
        self, env: project_environment.ProjectEnvironment
    ) -> project_environment.EnvironmentImage:
        """The image `env` describes, built on this engine (or the one built before),
        labelled with this worker; raises EnvironmentFileError or EnvironmentBuildError."""
        labels = {"cloudrunner.worker": self.worker_id}
        return project_environment.build_image(self.client(), env, labels=labels)


def reap_orphans(client: docker.DockerClient, worker_id: str, audit: AuditWriter) -> int:
    """Remove sandbox containers that a worker process which is gone left behind (a crash,
    a SIGKILL), recording each; how many were removed. Best effort: a failure is a warning."""
    try:
        orphans = reaper.reap(client, current_worker=worker_id)
    except Exception as exc:  # docker-py lets raw requests errors through
        _log.warning("worker.reap_failed", problem=f"could not look for orphaned sandboxes: {exc}")
        return 0
    for orphan in orphans:
        record_builders.append(audit, (RecordKind.REAPED, record_builders.reaped(orphan)))
    return len(orphans)
