"""Removing sandbox containers whose worker is gone (`cloudrunner sandbox prune`).

Every sandbox container carries the worker's id and the host name, pid and process start
time of the process that made it. A container is an orphan when that process no longer
runs on this host (its pid is gone or now belongs to a process started at another time).

Whose containers may be removed:

- a starting worker (`reap(current_worker=ID)`): only its **own** worker id's, made on
  **this** host, by a process that is gone. Several processes share one worker id (one
  `cloudrunner run` per event), so a live one's containers are kept by the liveness check;
  another worker's containers, a crashed one's included, are never touched, so concurrent
  workers or test runs on one host cannot reap each other's sandboxes. A crashed worker's
  containers go when a worker with its id starts again, or by hand;
- `prune` without options: the configured worker's (as above, `worker_id` of the settings);
- `prune --worker ID`: that worker's, gone ones on this host and all of them made on
  another host (the operator says that worker is gone);
- `prune --all-workers`: every gone worker's on this host (the old, host-wide sweep, only
  when asked for).

Containers without these labels were not made by a sandbox and are never touched. A
removed session container's channel directory (`agent_channel`: the private directory its
agent's socket was in, found from its mounts) goes with it.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass

import docker
import docker.errors

from cloudrunner.sandbox import agent_channel
from cloudrunner.sandbox.base import HOST_LABEL, PID_LABEL, PROCESS_START_LABEL, WORKER_LABEL
from cloudrunner.sandbox.container_plan import process_start


@dataclass(frozen=True)
class Orphan:
    container_id: str
    name: str
    worker: str
    status: str
    reason: str


def _alive(pid: int, start: str) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    return process_start(pid) == start


def find_orphans(
    client: docker.DockerClient,
    *,
    worker: str | None = None,
    current_worker: str | None = None,
    all_workers: bool = False,
) -> list[Orphan]:
    """Sandbox containers whose worker is gone, chosen by exactly one of: `worker` (named by
    the operator, on any host), `current_worker` (the calling worker's own, on this host)
    or `all_workers` (every worker's on this host). See the module's docstring."""
    if sum((worker is not None, current_worker is not None, all_workers)) != 1:
        raise ValueError("give exactly one of worker, current_worker and all_workers")
    here = socket.gethostname()
    selectors = [WORKER_LABEL]
    if worker is not None:
        selectors = [f"{WORKER_LABEL}={worker}"]
    elif current_worker is not None:
        selectors = [f"{WORKER_LABEL}={current_worker}", f"{HOST_LABEL}={here}"]
    orphans: list[Orphan] = []
    for summary in client.api.containers(all=True, filters={"label": selectors}):
        labels: dict[str, str] = summary.get("Labels") or {}
        owner = labels.get(WORKER_LABEL, "")
        host, pid, start = (labels.get(k) for k in (HOST_LABEL, PID_LABEL, PROCESS_START_LABEL))
        if host is None or pid is None or start is None:
            continue
        # The filter already chose; these guard against an engine that ignores a filter.
        if current_worker is not None and (owner != current_worker or host != here):
            continue
        if worker is not None and owner != worker:
            continue
        if host == here and pid == str(os.getpid()):
            continue  # this very process's
        if host != here:
            if worker is None:
                continue
            reason = f"worker {owner} (on host {host}) was named as gone"
        else:
            try:
                pid_number = int(pid)
            except ValueError:
                pid_number = -1
            if _alive(pid_number, start):
                continue
            reason = f"worker {owner} (pid {pid} on {host}) is gone"
        names = summary.get("Names") or [""]
        orphans.append(
            Orphan(
                container_id=str(summary["Id"])[:12],
                name=str(names[0]).lstrip("/"),
                worker=owner,
                status=str(summary.get("State", "")),
                reason=reason,
            )
        )
    return orphans


def reap(
    client: docker.DockerClient,
    *,
    worker: str | None = None,
    current_worker: str | None = None,
    all_workers: bool = False,
    dry_run: bool = False,
) -> list[Orphan]:
    """Remove the orphans (see `find_orphans`); returns what was (or would be) removed.

    A worker calls this on start with its own id as `current_worker`.
    """
    orphans = find_orphans(
        client, worker=worker, current_worker=current_worker, all_workers=all_workers
    )
    if not dry_run:
        for orphan in orphans:
            remove_container(client, orphan.container_id)
    return orphans


def remove_container(client: docker.DockerClient, container_id: str) -> None:
    """Remove a sandbox container and, for a session container, its channel directory."""
    channel = None
    with contextlib.suppress(docker.errors.NotFound):
        channel = agent_channel.directory_of(client.api.inspect_container(container_id))
        client.api.remove_container(container_id, force=True, v=True)
    if channel is not None:
        agent_channel.remove_directory(channel)
