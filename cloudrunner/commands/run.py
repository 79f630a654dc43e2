"""`cloudrunner run`: one event in process. Event JSON on stdin, the merged answer on stdout.

The flag names are a contract (scripts and CI jobs depend on them); each maps to one
settings key, so `--state-dir X`, `CLOUDRUNNER_STATE_DIR=X` and `state_dir = "X"` in the
settings file mean the same thing, with the flag winning. `serve`, `replay` and `config
show` take the same settings flags from here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cloudrunner.errors import CloudrunnerError

if TYPE_CHECKING:
    from cloudrunner.settings import Settings

#: flag -> (settings key, argparse keyword arguments)
SETTINGS_FLAGS: dict[str, tuple[str, dict[str, object]]] = {
    "--profile": ("profile", {"choices": ["cloud", "desktop"]}),
    "--enterprise-hooks": (
        "sources.enterprise_hooks",
        {"type": Path, "metavar": "FILE", "help": "a missing file means no enterprise hooks"},
    ),
    "--team-hooks": ("sources.team_hooks", {"type": Path, "metavar": "PATH"}),
    "--claude-code": (
        "sources.claude_code",
        {
            "action": "store_const",
            "const": True,
            "help": "also load the workspace's Claude Code hooks (.claude/settings*.json)",
        },
    ),
    "--audit-log": ("audit.path", {"type": Path, "metavar": "FILE"}),
    "--state-dir": ("state_dir", {"type": Path, "metavar": "DIR"}),
    "--isolation": ("sandbox.isolation", {"choices": ["hook", "session"]}),
    "--runtime": ("sandbox.runtime", {"choices": ["runc", "runsc"]}),
    "--image": ("sandbox.image", {"metavar": "NAME"}),
    "--repo": ("workspace.repo", {"metavar": "URL|PATH"}),
    "--ref": ("workspace.ref", {"metavar": "REF"}),
    "--workspace": (
        "workspace.path",
        {"type": Path, "metavar": "DIR", "help": "adopt this checkout (or clone --repo into it)"},
    ),
    "--record": (
        "audit.record_path",
        {
            "type": Path,
            "metavar": "FILE",
            "help": "also append each answered event to this replayable event stream",
        },
    ),
}


FlagTable = dict[str, tuple[str, dict[str, object]]]


def add_settings_flags(parser: argparse.ArgumentParser, extra: FlagTable | None = None) -> None:
    """`--config` and every flag of SETTINGS_FLAGS (and `extra`, a command's own)."""
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="settings file (default: CLOUDRUNNER_CONFIG)"
    )
    for flag, (key, kwargs) in {**SETTINGS_FLAGS, **(extra or {})}.items():
        options = dict(kwargs)
        help_text = str(options.pop("help", f"settings: {key}"))
        parser.add_argument(flag, dest=_dest(flag), help=help_text, **options)  # type: ignore[arg-type]


def _dest(flag: str) -> str:
    return "setting_" + flag.lstrip("-").replace("-", "_")


def settings_from(args: argparse.Namespace, extra: FlagTable | None = None) -> Settings:
    from cloudrunner.settings import load_settings

    flags = {**SETTINGS_FLAGS, **(extra or {})}
    overrides = {key: getattr(args, _dest(flag), None) for flag, (key, _) in flags.items()}
    return load_settings(args.config, overrides=overrides)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "run",
        help="answer one event in process: event JSON on stdin, merged answer on stdout",
    )
    add_settings_flags(parser)
    parser.add_argument(
        "--event",
        metavar="NAME",
        help="the event name (default: the payload's hook_event_name)",
    )
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    from cloudrunner.worker import Worker

    settings = settings_from(args)
    if sys.stdin.isatty():
        raise CloudrunnerError(
            "cloudrunner run reads the event JSON on stdin; pipe it in "
            "(echo '{...}' | cloudrunner run ...)"
        )
    # Read one byte past the cap, so an oversized payload is refused rather than truncated.
    payload = sys.stdin.buffer.read(settings.max_payload_bytes + 1)
    with Worker(settings) as worker:
        reply = worker.handle(payload, args.event)
    sys.stdout.write(json.dumps(reply.answer, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return 0
