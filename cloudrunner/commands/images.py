"""`cloudrunner images build`: build the hook runtime images locally (the building itself
is cloudrunner/images/)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from cloudrunner.command_groups import command_group, subcommand


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = command_group(sub, "images", "build the hook runtime images locally")
    subcommand(group, "build", "build cloudrunner/base and cloudrunner/hook-runtime",
               add_build_arguments, build_command)  # fmt: skip
    subcommand(group, "worker", "build the worker's image from this installation",
               add_worker_arguments, worker_command)  # fmt: skip
    subcommand(group, "recipes", "where the image recipes are, and the images each builds",
               lambda parser: None, recipes_command)  # fmt: skip


def add_build_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force", action="store_true", help="rebuild even when the build keys match"
    )
    parser.add_argument(
        "--tag", metavar="NAME:TAG", type=_image_ref,
        help="build the hook runtime only as this image (the default tags are left alone)",
    )  # fmt: skip


def _image_ref(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9._/-]*:[\w][\w.-]{0,127}", value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an image reference of the form name:tag (lowercase name)"
        )
    return value


def build_command(args: argparse.Namespace) -> int:
    from cloudrunner.images import build_all

    for step in build_all(force=bool(args.force), tag=args.tag):
        state = "built" if step.built else "up to date"
        print(f"{step.image}\t{state}\t{step.key[:12]}")
    return 0


def recipes_command(args: argparse.Namespace) -> int:
    from cloudrunner.images import recipes

    for recipe in recipes():
        print(f"{recipe.name}\t{recipe.path}\t{' '.join(recipe.images)}")
    return 0


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tag", metavar="NAME:TAG", type=_image_ref,
        help="tag the image only as this (default: cloudrunner/worker:<version> and :latest)",
    )  # fmt: skip
    parser.add_argument(
        "--client", metavar="PATH", type=Path,
        help="the compiled client to put in the image (default: the cloudrunner-hook beside "
        "this cloudrunner; it must match the engine's architecture)",
    )  # fmt: skip
    parser.add_argument(
        "--base", metavar="IMAGE", default="cloudrunner/base:bookworm",
        help="the Debian bookworm image to build on (default: %(default)s, which "
        "`cloudrunner images build` makes)",
    )  # fmt: skip


def worker_command(args: argparse.Namespace) -> int:
    from cloudrunner.images import build_worker

    print(build_worker(tag=args.tag, client=args.client, base=args.base))
    return 0
