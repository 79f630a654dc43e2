"""`cloudrunner config init|show`: write a commented default settings file, or print the
effective settings (the settings themselves are cloudrunner/settings.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cloudrunner.command_groups import command_group, subcommand
from cloudrunner.commands.run import add_settings_flags, settings_from


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = command_group(sub, "config", "write or show the worker settings")
    subcommand(group, "init", "write a commented default settings file", add_init_arguments,
               init_command)  # fmt: skip
    subcommand(group, "show", "print the effective settings as TOML", add_settings_flags,
               show_command)  # fmt: skip


def add_init_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", type=Path, default=Path("cloudrunner.toml"))
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")


def init_command(args: argparse.Namespace) -> int:
    from cloudrunner.settings import SettingsError, default_toml

    path: Path = args.file
    if path.exists() and not args.force:
        raise SettingsError(f"{path} exists already; pass --force to overwrite it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(default_toml())
    except OSError as exc:
        raise SettingsError(f"cannot write {path}: {exc.strerror}") from exc
    print(f"wrote {path}")
    return 0


def show_command(args: argparse.Namespace) -> int:
    from cloudrunner.settings import to_toml

    print(to_toml(settings_from(args)), end="")
    return 0
