"""`cloudrunner replay STREAM`: run a recorded or hand-written event stream against a
repository and report divergences (the replay itself is cloudrunner/replay/)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cloudrunner.commands.run import SETTINGS_FLAGS, _dest, add_settings_flags
from cloudrunner.errors import ExitCode
from cloudrunner.replay import ReplayError, load_stream, render_text, run_replay


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "replay",
        help="run a recorded or hand-written event stream against a repository, report divergences",
    )
    parser.add_argument(
        "stream",
        type=Path,
        metavar="STREAM",
        help="a recorded or hand-written stream (JSON lines, or .toml)",
    )
    add_settings_flags(parser)
    parser.add_argument(
        "--update", action="store_true", help="rewrite the expected answers with the replayed ones"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(handler=replay_command)


def replay_command(args: argparse.Namespace) -> int:
    from cloudrunner.settings import load_settings

    stream = load_stream(args.stream)
    repo = args.setting_repo or ""
    adopt: Path | None = args.setting_workspace
    if not repo and adopt is None:
        raise ReplayError(
            "replay needs the repository: pass --repo URL|PATH (or --workspace DIR to adopt "
            "a checkout in place)"
        )
    ref: str | None = args.setting_ref

    def settings_for(state: Path, target: str | None) -> Any:
        overrides = {
            key: getattr(args, _dest(flag), None) for flag, (key, _) in SETTINGS_FLAGS.items()
        }
        overrides.update(
            {
                "state_dir": state,
                "workspace.ref": target or "",
                # the replay's own records, never the configured (production) log or stream
                "audit.path": args.setting_audit_log or state / "audit.log",
                "audit.record_path": args.setting_record,
            }
        )
        if repo:
            overrides["workspace.repo"] = repo
            overrides["workspace.path"] = adopt or state / "workspace"
        settings = load_settings(args.config, overrides=overrides)
        if args.setting_record is None:
            settings.audit.record_path = None
        return settings

    report = run_replay(
        stream, settings_for, repo=repo or str(adopt), ref=ref, update=args.update,
        state_dir=args.setting_state_dir,
    )  # fmt: skip
    if args.format == "json":
        print(json.dumps(report.as_json(), indent=2))
    else:
        print(render_text(report))
    sys.stdout.flush()
    if report.diverged and not args.update:
        return ExitCode.FINDINGS
    return ExitCode.OK
