"""The `cloudrunner` command: argument parsing and the single error boundary.

Each command is one module of cloudrunner/commands/ (its arguments and thin handlers; the
work is done by the modules that own it); this file only wires them up and maps errors to
exit codes, so no traceback reaches a user for an expected failure.
"""

from __future__ import annotations

import sys

from cloudrunner.errors import CloudrunnerError, ExitCode

TYPE_CHECKING = False  # the client's fast path must not pay for typing or argparse
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    Handler = Callable[[argparse.Namespace], int]

#: every command, in --help order: each is the module of that name in cloudrunner/commands/,
#: whose `add_parser` adds it (its arguments and handler) to the top-level parser
COMMANDS = (
    "run", "serve", "hook", "health", "images", "config",
    "gate", "validate", "hooks", "audit", "sandbox", "replay", "vm",
)  # fmt: skip
#: commands served by the stdlib-only client without importing the rest of the package
CLIENT_COMMANDS = ("hook", "health")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or, given the command word, one with only that command: each
    command's module imports what it needs (docker, pydantic, ...), and `audit stats` need
    not wait for what `run` imports."""
    import argparse
    import importlib

    parser = argparse.ArgumentParser(
        prog="cloudrunner",
        description="Run Cursor-style agent hooks for cloud agents in hardened containers.",
    )
    parser.add_argument(
        "--version",
        action=_version_action(),
        nargs=0,
        help="show program's version number and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    names = [command] if command is not None and command in COMMANDS else COMMANDS
    for name in names:
        importlib.import_module(f"cloudrunner.commands.{name}").add_parser(sub)
    return parser


def _version_action() -> type[argparse.Action]:
    import argparse

    class VersionAction(argparse.Action):
        """`--version`: the version and the commit (cloudrunner/version.py), found only
        when asked (from a checkout that is a `git` call, which no other command pays for)."""

        def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
            from cloudrunner.version import describe

            print(describe())
            parser.exit()

    return VersionAction


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in CLIENT_COMMANDS:
        from cloudrunner.commands import hook  # the fast path: the standard library only

        return hook.main(words)
    try:
        parser = build_parser(words[0] if words else None)
        args = parser.parse_args(words)
        handler: Handler = args.handler
        from cloudrunner.logs import configure_logging

        configure_logging()
        return handler(args)
    except CloudrunnerError as exc:
        print(f"cloudrunner: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("cloudrunner: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return ExitCode.OK
    except Exception as exc:  # a bug: exit 70, its traceback in a file
        from cloudrunner.crash import report_bug

        return report_bug(exc)


if __name__ == "__main__":
    raise SystemExit(main())
