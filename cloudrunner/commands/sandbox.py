"""`cloudrunner sandbox prune`: remove sandbox containers whose worker is gone (the finding
and removing is cloudrunner/sandbox/reaper.py, which the daemon also runs at start-up)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cloudrunner.command_groups import command_group, subcommand


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = command_group(sub, "sandbox", "manage sandbox containers")
    subcommand(group, "prune", "remove sandbox containers whose worker is gone",
               add_prune_arguments, prune_command)  # fmt: skip


def add_prune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="settings file naming this worker's id"
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--worker",
        metavar="ID",
        help="that worker's containers instead of this one's; also removes them when it ran "
        "on another host",
    )
    which.add_argument(
        "--all-workers",
        action="store_true",
        help="the containers of every worker on this host whose process is gone",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list what would be removed, remove nothing"
    )


def prune_command(args: argparse.Namespace) -> int:
    worker: str | None = args.worker
    current: str | None = None
    if worker is None and not args.all_workers:
        from cloudrunner.settings import load_settings

        current = load_settings(args.config).effective_worker_id
    from cloudrunner.docker_engine import connect
    from cloudrunner.sandbox.reaper import reap

    client = connect()
    try:
        orphans = reap(
            client,
            worker=worker,
            current_worker=current,
            all_workers=bool(args.all_workers),
            dry_run=bool(args.dry_run),
        )
    finally:
        client.close()
    verb = "would remove" if args.dry_run else "removed"
    for orphan in orphans:
        print(f"{verb}\t{orphan.container_id}\t{orphan.name}\t{orphan.status}\t{orphan.reason}")
    whose = (
        f"worker {worker}"
        if worker is not None
        else "every worker on this host"
        if args.all_workers
        else f"worker {current} on this host"
    )
    print(f"{verb} {len(orphans)} container(s) of {whose}")
    return 0
