"""`cloudrunner config init|show`: write a commented default settings file, or print the
effective settings (the settings themselves are cloudrunner/settings.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cloudrunner.commands.run import add_settings_flags, settings_from


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("config", help="write or show the worker settings")
    csub = p.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    init = csub.add_parser("init", help="write a commented default settings file")
    init.add_argument("file", nargs="?", type=Path, default=Path("cloudrunner.toml"))
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(handler=init_command)
    show = csub.add_parser("show", help="print the effective settings as TOML")
    add_settings_flags(show)
    show.set_defaults(handler=show_command)


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
