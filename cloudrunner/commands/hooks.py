"""`cloudrunner hooks digest`: print the digest of a repository's project hooks, to approve
in `sources.project_digests` (the digest itself is cloudrunner/sources/pinning.py);
`--files` lists what it covers and what it cannot see (a command built at run time, a line
that cannot be parsed), which a reviewer must read by hand. A hook whose targets cannot be
known from its command line makes the hooks unapprovable until a digest path covers every
file it may run: the command says which hooks and why on stderr, and exits 1."""

from __future__ import annotations

import argparse
import sys
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
        "--files", action="store_true",
        help="also list every file the digest covers, what it cannot see, and the hooks "
        "that need a covered path: a digest covers the hooks file, the files a command "
        "names and .cursor/hooks/; a command whose targets its text cannot tell (a cd, "
        "$PWD, ${VAR:-default}, an unset variable, eval, $(...), a pattern, an unparsable "
        "word) is approvable only when --path or sources.project_digest_paths covers every "
        "file it may run",
    )  # fmt: skip
    parser.add_argument(
        "--path", action="append", default=[], metavar="GLOB",
        help="also cover these repository files (as sources.project_digest_paths; "
        "added to the settings' own)",
    )  # fmt: skip
    parser.add_argument(
        "--config", type=Path, default=None, metavar="FILE",
        help="the worker settings whose sources.project_digest_paths apply "
        "(default: CLOUDRUNNER_CONFIG, else /etc/cloudrunner/config.toml when it exists)",
    )  # fmt: skip
    parser.add_argument(
        "--file", default=".cursor/hooks.json", metavar="PATH",
        choices=[".cursor/hooks.json", ".claude/settings.json", ".claude/settings.local.json"],
        help="the hooks file to digest, relative to DIR (Claude Code files are approved "
        "one by one; default: .cursor/hooks.json)",
    )  # fmt: skip


def digest_command(args: argparse.Namespace) -> int:
    from cloudrunner.settings import load_settings
    from cloudrunner.sources import (
        DigestError,
        HooksFileRefused,
        check_glob,
        compute,
        read_hooks_bytes,
    )

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
    try:
        extra = [check_glob(glob) for glob in args.path]
    except ValueError as exc:
        raise DigestError(f"--path: {exc}") from None
    globs = [*load_settings(args.config).sources.project_digest_paths, *extra]
    result = compute(root, data, relative, extra_paths=globs)
    if args.files:
        print(result.render())
    elif result.approvable:
        print(result.digest)
    if not result.approvable:
        for hook in result.uncovered:
            print(f"cloudrunner: {hook.describe()}", file=sys.stderr)
        print(
            f"cloudrunner: {path}: not approvable until every file these hooks may run is "
            "covered (a pinned worker does not load them, whatever its approved digests)",
            file=sys.stderr,
        )
        return 1
    if result.unseen and not args.files:
        print(
            f"note: the digest cannot see {len(result.unseen)} part(s) of the commands "
            "(built at run time, or unparsable); `--files` lists them",
            file=sys.stderr,
        )
    return 0
