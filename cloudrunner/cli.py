"""The `cloudrunner` command: argument parsing and the single error boundary.

Each subcommand lives in the module that owns its job; this file only wires them up
and maps errors to exit codes, so no traceback reaches a user for an expected failure.
"""

from __future__ import annotations

import sys

from cloudrunner.errors import CloudrunnerError, ExitCode

TYPE_CHECKING = False  # the client's fast path must not pay for typing or argparse
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    Handler = Callable[[argparse.Namespace], int]

#: commands served by the stdlib-only client without importing the rest of the package
CLIENT_COMMANDS = ("hook", "health")


def _add_images(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cloudrunner import images

    p = sub.add_parser("images", help="build the hook runtime images locally")
    isub = p.add_subparsers(dest="images_command", required=True, metavar="COMMAND")
    b = isub.add_parser("build", help="build cloudrunner/base and cloudrunner/hook-runtime")
    images.add_build_arguments(b)
    b.set_defaults(handler=images.build_command)


def _add_sandbox(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cloudrunner.sandbox import reaper

    p = sub.add_parser("sandbox", help="manage sandbox containers")
    ssub = p.add_subparsers(dest="sandbox_command", required=True, metavar="COMMAND")
    pr = ssub.add_parser("prune", help="remove sandbox containers whose worker is gone")
    reaper.add_prune_arguments(pr)
    pr.set_defaults(handler=reaper.prune_command)


def _add_hooks(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cloudrunner import pinning

    p = sub.add_parser("hooks", help="inspect a repository's project hooks")
    hsub = p.add_subparsers(dest="hooks_command", required=True, metavar="COMMAND")
    d = hsub.add_parser(
        "digest",
        help="print the digest of a repository's hooks (the file and the scripts it runs), "
        "to approve in sources.project_digests",
    )
    pinning.add_digest_arguments(d)
    d.set_defaults(handler=pinning.digest_command)


def _add_gate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cloudrunner import gate

    p = sub.add_parser("gate", help="hold the writability gate open or closed, or show it")
    gate.add_arguments(p)


def _add_audit(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cloudrunner.audit import command as audit_command

    p = sub.add_parser("audit", help="inspect and verify the audit log")
    asub = p.add_subparsers(dest="audit_command", required=True, metavar="COMMAND")
    v = asub.add_parser("verify", help="check the hash chain of an audit log and its rotated files")
    audit_command.add_verify_arguments(v)
    v.set_defaults(handler=audit_command.verify_command)
    audit_command.add_reading_commands(asub)


def _add_replay(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cloudrunner import replay

    p = sub.add_parser(
        "replay",
        help="run a recorded or hand-written event stream against a repository, report divergences",
    )
    replay.add_arguments(p)


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cloudrunner import serve_command

    p = sub.add_parser(
        "serve",
        help="the long-running worker: HTTP API on a unix socket (and TCP), warm sandboxes",
    )
    serve_command.add_arguments(p)


def _add_client(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Listed for --help; `main` dispatches these before building this parser.
    from cloudrunner import client

    hook = sub.add_parser(
        "hook", help="the per-event client: event JSON on stdin, the daemon's answer on stdout"
    )
    client.add_hook_arguments(hook)
    hook.set_defaults(handler=client.hook_command)
    health = sub.add_parser("health", help="exit 0 when the daemon is healthy (or --ready)")
    client.add_health_arguments(health)
    health.set_defaults(handler=client.health_command)


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cloudrunner import run_command

    p = sub.add_parser(
        "run",
        help="answer one event in process: event JSON on stdin, merged answer on stdout",
    )
    run_command.add_arguments(p)


def _add_config(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("config", help="write or show the worker settings")
    csub = p.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    init = csub.add_parser("init", help="write a commented default settings file")
    from pathlib import Path

    init.add_argument("file", nargs="?", type=Path, default=Path("cloudrunner.toml"))
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(handler=_config_init)
    show = csub.add_parser("show", help="print the effective settings as TOML")
    from cloudrunner import run_command

    run_command.add_settings_flags(show)
    show.set_defaults(handler=_config_show)


def _config_init(args: argparse.Namespace) -> int:
    from cloudrunner import settings

    return settings.config_init_command(args.file, force=bool(args.force))


def _config_show(args: argparse.Namespace) -> int:
    from cloudrunner import run_command, settings

    print(settings.to_toml(run_command.settings_from(args)), end="")
    return 0


def _add_validate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cloudrunner import validate

    p = sub.add_parser("validate", help="lint hooks files and show what runs in cloud agents")
    validate.add_arguments(p)
    p.set_defaults(handler=validate.validate_command)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or, given the command word, one with only that command: each
    command's module imports what it needs (docker, pydantic, ...), and `audit stats` need
    not wait for what `run` imports."""
    import argparse

    from cloudrunner import __version__

    parser = argparse.ArgumentParser(
        prog="cloudrunner",
        description="Run Cursor-style agent hooks for cloud agents in hardened containers.",
    )
    parser.add_argument("--version", action="version", version=f"cloudrunner {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    only = _COMMANDS.get(command or "")
    for add in [only] if only is not None else list(dict.fromkeys(_COMMANDS.values())):
        add(sub)
    return parser


#: the command word -> what adds its parser (one function may add several commands)
_COMMANDS: dict[str, Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = {
    "run": _add_run,
    "serve": _add_serve,
    "hook": _add_client,
    "health": _add_client,
    "images": _add_images,
    "config": _add_config,
    "gate": _add_gate,
    "validate": _add_validate,
    "hooks": _add_hooks,
    "audit": _add_audit,
    "sandbox": _add_sandbox,
    "replay": _add_replay,
}


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in CLIENT_COMMANDS:
        from cloudrunner import client  # the fast path: the standard library only

        return client.main(words)
    parser = build_parser(words[0] if words else None)
    args = parser.parse_args(words)
    handler: Handler = args.handler
    try:
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


if __name__ == "__main__":
    raise SystemExit(main())
