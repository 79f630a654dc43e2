"""Removing sandbox containers whose worker is gone (`cloudrunner sandbox prune`).

Every sandbox container carries the worker's id and the host name, pid and process start
time of the process that made it. A container is an orphan when that process no longer
runs on this host (its pid is gone or now belongs to a process started at another time).
Containers made on another host are left alone unless their worker is named explicitly
(`--worker ID`: the operator says it is gone); containers without these labels were not
made by a sandbox and are never touched.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
from dataclasses import dataclass

import docker
import docker.errors

from cloudrunner.docker_engine import connect
from cloudrunner.sandbox.base import HOST_LABEL, PID_LABEL, PROCESS_START_LABEL, WORKER_LABEL
from cloudrunner.sandbox.plan import process_start


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
) -> list[Orphan]:
    """Sandbox containers whose worker is gone (only `worker`'s when given)."""
    selector = f"{WORKER_LABEL}={worker}" if worker else WORKER_LABEL
    here = socket.gethostname()
    orphans: list[Orphan] = []
    for summary in client.api.containers(all=True, filters={"label": selector}):
        labels: dict[str, str] = summary.get("Labels") or {}
        owner = labels.get(WORKER_LABEL, "")
        host, pid, start = (labels.get(k) for k in (HOST_LABEL, PID_LABEL, PROCESS_START_LABEL))
        if host is None or pid is None or start is None:
            continue
        # Several processes may share one worker id (one `cloudrunner run` per event), so
        # the id alone does not make a container live: only this very process's are skipped
        # here, the others by the liveness check below.
        if owner == current_worker and host == here and pid == str(os.getpid()):
            continue
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
    dry_run: bool = False,
) -> list[Orphan]:
    """Remove the orphans (see `find_orphans`); returns what was (or would be) removed.

    A worker calls this on start with its own id as `current_worker`.
    """
    orphans = find_orphans(client, worker=worker, current_worker=current_worker)
    if not dry_run:
        for orphan in orphans:
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(orphan.container_id, force=True, v=True)
    return orphans


def add_prune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--worker",
        metavar="ID",
        help="only this worker's containers; also removes them when it ran on another host",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list what would be removed, remove nothing"
    )


def prune_command(args: argparse.Namespace) -> int:
    client = connect()
    try:
        orphans = reap(client, worker=args.worker, dry_run=bool(args.dry_run))
    finally:
        client.close()
    verb = "would remove" if args.dry_run else "removed"
    for orphan in orphans:
        print(f"{verb}\t{orphan.container_id}\t{orphan.name}\t{orphan.status}\t{orphan.reason}")
    print(f"{verb} {len(orphans)} container(s)")
    return 0
