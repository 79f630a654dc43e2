"""`cloudrunner hooks digest`: print the digest of a repository's project hooks, to approve
in `sources.project_digests` (the digest itself is cloudrunner/pinning.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cloudrunner.command_groups import command_group, subcommand


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = command_group(sub, "hooks", "inspect a repository's project hooks")
    subcommand(
        group,
        "digest",
        "print the digest of a repository's hooks (the file and the scripts it runs), "
        "to approve in sources.project_digests",
        add_digest_arguments,
        digest_command,
    )


def add_digest_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory", nargs="?", type=Path, default=Path("."), metavar="DIR",
        help="the repository whose .cursor/hooks.json is digested (default: .)",
    )  # fmt: skip
    parser.add_argument(
        "--files", action="store_true", help="also list every file the digest covers"
    )
    parser.add_argument(
        "--file", default=".cursor/hooks.json", metavar="PATH",
        choices=[".cursor/hooks.json", ".claude/settings.json", ".claude/settings.local.json"],
        help="the hooks file to digest, relative to DIR (Claude Code files are approved "
        "one by one; default: .cursor/hooks.json)",
    )  # fmt: skip


def digest_command(args: argparse.Namespace) -> int:
    from cloudrunner.pinning import DigestError, compute
    from cloudrunner.sources import HooksFileRefused, read_hooks_bytes

    root: Path = args.directory
    if not root.is_dir():
        raise DigestError(f"{root} is not a directory; give the repository's root")
    relative = getattr(args, "file", ".cursor/hooks.json")
    path = root / relative
    try:
        data = read_hooks_bytes(path, root)
    except FileNotFoundError:
        raise DigestError(
            f"{path} does not exist: {root} has no project hooks in {relative}"
        ) from None
    except HooksFileRefused as exc:
        raise DigestError(exc.message) from None
    result = compute(root, data, relative)
    print(result.render() if args.files else result.digest)
    return 0
