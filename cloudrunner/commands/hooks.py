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


def digest_command(args: argparse.Namespace) -> int:
    from cloudrunner.pinning import DigestError, compute
    from cloudrunner.sources import HOOKS_FILE_NAME, HooksFileRefused, read_hooks_bytes

    root: Path = args.directory
    if not root.is_dir():
        raise DigestError(f"{root} is not a directory; give the repository's root")
    path = root / ".cursor" / HOOKS_FILE_NAME
    try:
        data = read_hooks_bytes(path, root)
    except FileNotFoundError:
        raise DigestError(f"{path} does not exist: {root} has no project hooks") from None
    except HooksFileRefused as exc:
        raise DigestError(exc.message) from None
    result = compute(root, data)
    print(result.render() if args.files else result.digest)
    return 0
