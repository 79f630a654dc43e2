"""`cloudrunner gate open|close|auto|status`: hold the writability gate open or closed, or
show it and probe the workspace (the gate's state and probe are cloudrunner/event/gate.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cloudrunner.command_groups import command_group
from cloudrunner.event import (
    STATE_DIR_ENV,
    GateError,
    GateMode,
    ProbeResult,
    default_hook_user,
    evaluate,
    probe_writable,
    read_state,
    set_mode,
)
from cloudrunner.sandbox.limits import FALLBACK_HOOK_UID


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gsub = command_group(sub, "gate", "hold the writability gate open or closed, or show it")
    helps = {
        "open": "hold the gate open: hooks run even if the workspace probe fails",
        "close": "hold the gate closed: no hooks file is read and no hook runs",
        "auto": "let the workspace probe decide (the default)",
        "status": "print the gate mode and the result of a workspace probe",
    }
    for name, text in helps.items():
        p = gsub.add_parser(name, help=text, description=text)
        p.add_argument(
            "--state-dir",
            type=Path,
            default=os.environ.get(STATE_DIR_ENV) or None,
            help=f"the worker's state directory (default: ${STATE_DIR_ENV})",
        )
        if name == "status":
            p.add_argument(
                "--workspace",
                type=Path,
                default=None,
                help="the workspace to probe (default: the current directory)",
            )
            p.add_argument(
                "--hook-user",
                type=_user,
                default=None,
                metavar="UID[:GID]",
                help="probe as this user (default: the workspace owner, or "
                f"{FALLBACK_HOOK_UID} when root owns it, as hooks run)",
            )
            p.add_argument("--json", action="store_true", help="print one JSON object")
        p.set_defaults(handler=command, gate_command=name)


def _grant_hint(workspace: Path, user: tuple[int, int] | None, probe: ProbeResult) -> str:
    """Why a workspace of another owner may still work: the worker grants the hook uid
    access (`ownership`) before its first probe, which `gate status` does not do."""
    if probe.writable or user is None or "(EACCES)" not in probe.detail:
        return ""
    try:
        owner = workspace.stat().st_uid
    except OSError:
        return ""
    if owner == user[0]:
        return ""
    return (
        f"the worker grants uid {user[0]} the owner's access (POSIX ACL entries) when it "
        "adopts the workspace, before its own probe"
    )


def _user(text: str) -> tuple[int, int]:
    uid, _, gid = text.partition(":")
    try:
        pair = int(uid), int(gid or uid)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not UID or UID:GID (numbers)") from None
    if pair[0] <= 0 or pair[1] <= 0:
        raise argparse.ArgumentTypeError("hooks never run as uid or gid 0; give another id")
    return pair


_MODES = {"open": GateMode.OPEN, "close": GateMode.CLOSED, "auto": GateMode.AUTO}


def command(args: argparse.Namespace) -> int:
    state_dir: Path | None = args.state_dir
    if state_dir is None:
        raise GateError(f"no state directory: give --state-dir DIR or set ${STATE_DIR_ENV}")
    name: str = args.gate_command
    if name in _MODES:
        state = set_mode(state_dir, _MODES[name])
        print(f"gate: {state.mode.value} (generation {state.generation}) in {state_dir}")
        return 0
    workspace: Path = (args.workspace or Path.cwd()).absolute()
    state = read_state(state_dir)
    user: tuple[int, int] | None = args.hook_user or default_hook_user(workspace)
    decision = evaluate(workspace, state_dir, as_user=user)
    # Held closed, evaluate() leaves the workspace alone; status was asked to probe.
    probe = decision.probe if decision.probe is not None else probe_writable(workspace, user)
    hint = _grant_hint(workspace, user, probe)
    if hint:
        probe = ProbeResult(probe.path, probe.writable, f"{probe.detail}; {hint}")
    if args.json:
        print(
            json.dumps(
                {
                    "mode": state.mode.value,
                    "generation": state.generation,
                    "changed_at": state.changed_at,
                    "open": decision.open,
                    "reason": decision.reason,
                    "workspace": str(probe.path),
                    "writable": probe.writable,
                    "probe": probe.detail,
                }
            )
        )
        return 0
    out = sys.stdout
    out.write(f"mode:      {state.mode.value} (generation {state.generation})\n")
    out.write(f"workspace: {probe.path}\n")
    out.write(f"probe:     {'writable' if probe.writable else 'not writable'}: {probe.detail}\n")
    out.write(f"gate:      {'open' if decision.open else 'closed'}: {decision.reason}\n")
    return 0
