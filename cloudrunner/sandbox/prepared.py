"""What every sandbox sets up from its spec before any container exists."""

from __future__ import annotations

import threading
import uuid

import docker

from cloudrunner.closing import ClosesOnExit
from cloudrunner.sandbox import container_plan, engine
from cloudrunner.sandbox.base import SandboxSpec


class PreparedSandbox(ClosesOnExit):
    """The checked spec, the engine link, the hook uid/gid, the data mounts and an id.

    Raises SandboxConfigError for a spec that cannot work; contacts no engine.
    """

    def __init__(
        self,
        spec: SandboxSpec,
        client: docker.DockerClient | engine.EngineLink | None,
        id_prefix: str,
    ) -> None:
        container_plan.validate_spec(spec)
        self.spec = spec
        self._link = client if isinstance(client, engine.EngineLink) else engine.EngineLink(client)
        self._uid, self._gid = container_plan.hook_identity(spec)
        self._mounts = container_plan.data_mounts(spec)
        self._id = f"{id_prefix}-{uuid.uuid4().hex[:12]}"
        self._lock = threading.Lock()
        self._closed = False

    @property
    def sandbox_id(self) -> str:
        return self._id
