"""`cloudrunner vm`: set up a cloud agent's VM in one command (the work is in
cloudrunner/vm/): the agent's hooks file routing the 14 cloud events to the
client, and a systemd unit for `cloudrunner serve` on the agent's workspace. With
`--check`, report what an existing agent configuration lacks and exit 1 when it lacks
anything."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cloudrunner import vm
from cloudrunner.commands.run import SETTINGS_FLAGS, add_settings_flags, settings_from
from cloudrunner.commands.serve import SERVE_FLAGS
from cloudrunner.errors import ExitCode
from cloudrunner.sources import DEFAULT_ENTERPRISE_PATH
from cloudrunner.vm import self_call_problem

DEFAULT_AGENT_HOOKS = Path("/etc/cursor/hooks.json")
DEFAULT_UNIT = Path("/etc/systemd/system/cloudrunner.service")
#: where systemd reads an operator's units from
SYSTEMD_DIRS = (Path("/etc/systemd/system"), Path("/run/systemd/system"))
#: the daemon's enterprise hooks file when none is given: a file of its own, never the agent's
DEFAULT_ENTERPRISE = DEFAULT_ENTERPRISE_PATH


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "vm",
        help="set up a cloud agent's VM: the agent's hooks file for the 14 cloud events "
        "and a systemd unit for the daemon (or --check an existing one)",
    )
    add_settings_flags(parser, SERVE_FLAGS)
    parser.add_argument(
        "--agent-hooks", type=Path, default=DEFAULT_AGENT_HOOKS, metavar="FILE",
        help=f"the agent's hooks file to write or check (default {DEFAULT_AGENT_HOOKS})",
    )  # fmt: skip
    parser.add_argument(
        "--unit", type=Path, default=DEFAULT_UNIT, metavar="FILE",
        help=f"the systemd unit to write (default {DEFAULT_UNIT})",
    )  # fmt: skip
    parser.add_argument(
        "--client", type=Path, metavar="PATH",
        help=f"the client the agent runs (default: {vm.COMPILED_CLIENT} beside this "
        "cloudrunner, else `cloudrunner hook`)",
    )  # fmt: skip
    parser.add_argument(
        "--user",
        metavar="NAME",
        help="the unit runs the daemon as this user (with the docker group)",
    )
    parser.add_argument(
        "--check", action="store_true",
        help="write nothing: report what the existing agent hooks file lacks (exit 1 if any)",
    )  # fmt: skip
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    settings = settings_from(args, SERVE_FLAGS)
    workspace = settings.workspace.path
    if workspace is None or not workspace.is_absolute():
        raise vm.VmSetupError(
            "give --workspace DIR, the absolute path of the checkout the agent edits (with "
            "--repo URL the daemon clones into it)"
        )
    agent_hooks: Path = args.agent_hooks.absolute()
    enterprise = settings.sources.enterprise_hooks or DEFAULT_ENTERPRISE
    if os.path.realpath(enterprise) == os.path.realpath(agent_hooks):
        raise vm.VmSetupError(
            f"the daemon would load the agent's hooks file {agent_hooks} as its enterprise "
            "hooks and call itself; give the fleet's hooks another file with "
            f"--enterprise-hooks FILE (the default is {DEFAULT_ENTERPRISE})"
        )
    problem = self_call_problem(settings)
    if problem is not None:
        raise vm.VmSetupError(problem)
    made = vm.plan(settings)
    for note in made.notes:
        print(f"cloudrunner: note: {note}", file=sys.stderr)
    if args.check:
        from cloudrunner.vm import missing

        return _check(agent_hooks, made, missing(settings, args.client))
    _refuse_to_drop_hooks(agent_hooks)
    client = vm.find_client(args.client)
    document = vm.agent_hooks(made.needs, client, settings.socket_path)
    launcher = client.argv[0] if not client.compiled else _cloudrunner_command()
    unit = vm.systemd_unit(
        settings, vm.serve_argv(settings, launcher, _given_flags(args)), args.user
    )
    vm.write_file(agent_hooks, json.dumps(document, indent=2) + "\n")
    vm.write_file(args.unit, unit)
    closed = [n.event for n in made.needs if n.fail_closed]
    print(f"wrote {agent_hooks}: the 14 cloud events, through {client.label}")
    print(f"  socket {settings.socket_path}; workspace {workspace} (point the agent at it)")
    print(f"  failClosed: {', '.join(closed) if closed else 'none (no loaded hook needs it)'}")
    print(f"wrote {args.unit}: `cloudrunner serve` on the workspace, after docker.service")
    name = args.unit.name.removesuffix(".service")
    if args.unit.parent not in SYSTEMD_DIRS:
        print(f"next: install {args.unit} as /etc/systemd/system/{args.unit.name}, then")
    print(f"next: systemctl daemon-reload && systemctl enable --now {name}")
    return ExitCode.OK


def _check(agent_hooks: Path, made: vm.Plan, missing: list[str]) -> int:
    for line in missing:
        print(f"missing: {line}")
    faults = vm.check(vm.read_hooks_file(agent_hooks), made.needs)
    for fault in faults:
        print(f"{agent_hooks}: {fault}")
    if faults:
        print(f"{len(faults)} fault(s); `cloudrunner vm` with the same flags rewrites the file")
    else:
        print(f"{agent_hooks}: routes the 14 cloud events as the loaded sources need")
    if missing:
        print(f"{len(missing)} dependency(ies) missing on this machine (the lines above)")
    return 1 if faults or missing else ExitCode.OK


def _refuse_to_drop_hooks(agent_hooks: Path) -> None:
    """An existing agent hooks file is rewritten only when it holds nothing but entries
    calling the client: other hooks would be dropped silently."""
    if not agent_hooks.exists():
        return
    foreign = vm.foreign_entries(vm.read_hooks_file(agent_hooks))
    if foreign:
        raise vm.VmSetupError(
            f"{agent_hooks} holds hooks that do not call cloudrunner ({'; '.join(foreign[:3])}"
            f"{'; ...' if len(foreign) > 3 else ''}); give them to the daemon instead "
            "(--enterprise-hooks FILE, where they run in containers) or remove them, then run "
            "`cloudrunner vm` again"
        )


def _given_flags(args: argparse.Namespace) -> list[str]:
    """The settings flags given to `vm`, as `serve` takes them (paths made absolute)."""
    words: list[str] = []
    if args.config is not None:
        words += ["--config", str(args.config.absolute())]
    for flag in {**SETTINGS_FLAGS, **SERVE_FLAGS}:
        value = getattr(args, "setting_" + flag.lstrip("-").replace("-", "_"), None)
        if value is not None:
            words += [flag, str(value.absolute() if isinstance(value, Path) else value)]
    return words


def _cloudrunner_command() -> str:
    beside = Path(sys.executable).parent / "cloudrunner"
    return str(beside) if beside.is_file() else "cloudrunner"
