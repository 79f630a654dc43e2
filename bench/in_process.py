"""A worker in this process with a warm session pool, as the daemon holds one."""

from __future__ import annotations

import json
from typing import Any

import docker

from bench.cases import EVENT, PAYLOAD
from bench.fixtures import Scene
from cloudrunner.closing import ClosesOnExit
from cloudrunner.sandbox.engine import EngineLink
from cloudrunner.sandbox.session_pool import SessionPool
from cloudrunner.worker import Worker


def event(conversation: str) -> bytes:
    document: dict[str, Any] = json.loads(PAYLOAD)
    document["conversation_id"] = conversation
    return json.dumps(document).encode()


class PooledWorker(ClosesOnExit):
    def __init__(self, scene: Scene, client: docker.DockerClient) -> None:
        self.link = EngineLink(client)
        self.pool = SessionPool(self.link)
        self.worker = Worker(scene.settings(), client=self.link, pool=self.pool, reap=False)

    def answer(self, payload: bytes) -> dict[str, Any]:
        reply = self.worker.handle(payload, EVENT)
        if reply.gated:
            raise RuntimeError("the writability gate held the event: the figure would be empty")
        return reply.answer

    def close(self) -> None:
        self.pool.close()
        self.worker.close()
