"""What every `cloudrunner NAME COMMAND` group (the modules of cloudrunner/commands/) does the
same way: the group's parser with its required sub-command, and each sub-command with its
flags and its handler."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def command_group(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """`cloudrunner NAME COMMAND`; the chosen command lands in `args.<NAME>_command`."""
    parser = sub.add_parser(name, help=help)
    return parser.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")


def subcommand(
    group: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    handler: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """One command of a group: its flags (`add_arguments`) and what runs it (`handler`)."""
    parser = group.add_parser(name, help=help)
    add_arguments(parser)
    parser.set_defaults(handler=handler)
    return parser
