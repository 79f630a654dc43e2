"""`cloudrunner validate [PATH ...]`: lint hooks files and say what would run in the cloud
(the checks and the report are the package cloudrunner/validate/)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cloudrunner.errors import ExitCode
from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import Diagnostic, info
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.settings import load_settings
from cloudrunner.validate import ImagePrograms, image_programs_for, render_text, validate_paths


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("validate", help="lint hooks files and show what runs in cloud agents")
    add_arguments(p)
    p.set_defaults(handler=validate_command)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths", nargs="*", type=Path, default=[Path(".")], metavar="PATH",
        help="a repository, a .cursor (or managed hooks) directory, or a hooks file (default: .)",
    )  # fmt: skip
    p.add_argument(
        "--profile", choices=[str(x) for x in Profile], default=str(Profile.CLOUD),
        help="what would load: cloud (default) or desktop",
    )  # fmt: skip
    p.add_argument(
        "--source", choices=[str(x) for x in SourceKind], default=str(SourceKind.PROJECT),
        help="which source the files are (default: project)",
    )  # fmt: skip
    p.add_argument("--format", choices=["text", "json"], default="text", help="output format")
    p.add_argument("--strict", action="store_true", help="exit 1 on warnings as well as errors")
    p.add_argument(
        "--image", metavar="NAME",
        help="the image hooks run in, for the program check (default: sandbox.image of the "
        "settings for --source)",
    )  # fmt: skip
    p.add_argument(
        "--no-image-check", action="store_true",
        help="do not look up commands' programs in the image (no Docker needed)",
    )  # fmt: skip
    p.add_argument(
        "--config", type=Path, metavar="FILE",
        help="the worker settings to judge against: the image and state dir, and the policy "
        "(allowed sources, pinned project digests, egress); default: CLOUDRUNNER_CONFIG, else "
        "/etc/cloudrunner/config.toml when present, else the defaults",
    )  # fmt: skip
    p.add_argument(
        "--claude-code", action="store_true",
        help="judge the repository's Claude Code hooks (.claude/settings*.json) as loading, as "
        "`serve --claude-code` would (settings: sources.claude_code)",
    )  # fmt: skip


def validate_command(args: argparse.Namespace) -> int:
    programs: ImagePrograms | None = None
    notes: list[Diagnostic] = []
    overrides: dict[str, object] = {}
    if getattr(args, "claude_code", False):
        overrides["sources.claude_code"] = True
    settings = load_settings(getattr(args, "config", None), overrides=overrides)
    source = SourceKind(args.source)
    if getattr(args, "no_image_check", False):
        notes.append(
            info(DiagnosticCode.IMAGE_CHECK_SKIPPED, "programs were not checked (--no-image-check)")
        )
    else:
        image = getattr(args, "image", None) or settings.sandbox.profile_for(source).image
        programs, notes = image_programs_for(image, settings.state_dir)
    report = validate_paths(
        args.paths, profile=Profile(args.profile), source=source,
        programs=programs, notes=notes, settings=settings,
    )  # fmt: skip
    if args.format == "json":
        json.dump(report.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render_text(report, sys.stdout)
    failed = report.errors > 0 or (args.strict and report.warnings > 0)
    return ExitCode.FINDINGS if failed else ExitCode.OK
