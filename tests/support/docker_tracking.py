"""Removing what a test created on the Docker engine, whatever happened in the test."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors

WORKER_LABEL = "cloudrunner.worker"


@dataclass
class DockerTracker:
    client: docker.DockerClient
    worker_id: str
    _containers: list[str] = field(default_factory=list)
    _networks: list[str] = field(default_factory=list)

    @property
    def labels(self) -> dict[str, str]:
        return {WORKER_LABEL: self.worker_id}

    def track(self, obj: Any) -> Any:
        """Remember a container or network (object or id) for removal at teardown."""
        if isinstance(obj, docker.models.networks.Network):
            self._networks.append(obj.id)
        elif isinstance(obj, docker.models.containers.Container):
            self._containers.append(obj.id)
        else:
            self._containers.append(str(obj))
        return obj

    def labelled_containers(self) -> list[Any]:
        # ignore_removed: a container the code under test removes between the engine's list
        # and docker-py's inspect of it is simply not there any more, not an error
        return list(
            self.client.containers.list(
                all=True,
                filters={"label": f"{WORKER_LABEL}={self.worker_id}"},
                ignore_removed=True,
            )
        )

    def cleanup(self) -> list[str]:
        """Remove everything; return the names of containers that were still running."""
        still_running: list[str] = []
        ids = set(self._containers)
        for container in self.labelled_containers():
            ids.add(container.id)
        for cid in ids:
            try:
                container = self.client.containers.get(cid)
            except docker.errors.NotFound:
                continue
            if container.status == "running" and cid not in self._containers:
                still_running.append(container.name)
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True, v=True)
        for nid in self._networks + [
            n.id
            for n in self.client.networks.list(
                filters={"label": f"{WORKER_LABEL}={self.worker_id}"}
            )
        ]:
            with contextlib.suppress(docker.errors.NotFound):
                self.client.networks.get(nid).remove()
        return still_running
