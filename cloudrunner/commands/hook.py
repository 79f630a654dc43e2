"""`cloudrunner hook EVENT`: the per-event client. Event JSON on stdin, the daemon's
merged answer on stdout, exit 0 (with `--exit-code`, exit 2 on a block, like a single
hook). `main` here is also the entry for `cloudrunner health` (cloudrunner/commands/health.py):
the launcher and `cloudrunner.cli.main` hand both words straight to it.

When no daemon answers, it runs the event in process if allowed (`--fallback
in-process`), and otherwise answers by the fail policy (cloudrunner/client/no_daemon.py:
--fail-closed / --fail-open, then CLOUDRUNNER_FAIL_CLOSED, then the policy file the daemon
publishes): a block on events that can block, or the neutral answer; either way with one
line on stderr saying what is down, and a line in the fallback spool for the daemon's
audit log. The compiled client (client/, `cloudrunner-hook`) behaves the same, word for
word; `--in-process` is what it runs for `--fallback in-process`.

Like cloudrunner/client/ (the transport), this module starts on every agent step:
the success path imports only the standard library (no argparse: the flags are parsed by
hand unless something unusual needs argparse's messages; no json, no os, no typing).
"""

# No `from __future__ import annotations`: importing __future__ costs the fast path ~0.1 ms.
# Annotations naming what only type checkers import are strings instead.
import sys

from cloudrunner.client import (
    BLOCKED_HEADER,
    DRAINING_CODE,
    Endpoint,
    HttpReply,
    Unreachable,
    UsageError,
    add_endpoint_arguments,
    bad_event_name,
    blocked_answer,
    blocks,
    endpoint_from,
    env_var,
    neutral_answer,
    os_text,
    request,
    seconds_above_zero,
    traceparent,
    usage_error,
)

TYPE_CHECKING = False  # typing itself costs ~10 ms to import; mypy honours this name
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any, NoReturn


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`hook` in the full parser, for --help and the reference: `main` parses it itself."""
    parser = sub.add_parser(
        "hook", help="the per-event client: event JSON on stdin, the daemon's answer on stdout"
    )
    add_hook_arguments(parser)
    parser.set_defaults(handler=hook_command)


class HookOptions:
    """`cloudrunner hook`'s flags (parsed by hand on the fast path, argparse otherwise)."""

    __slots__ = (
        "config",
        "event",
        "exit_code",
        "fail_closed",
        "fail_open",
        "fallback",
        "in_process",
        "socket",
        "timeout",
        "token_file",
        "url",
    )  # fmt: skip

    def __init__(self, event: str) -> None:
        self.event = event
        self.socket: str | None = None
        self.url: str | None = None
        self.token_file: str | None = None
        self.exit_code = False
        self.fallback: str | None = None
        self.fail_closed: bool | None = None
        self.fail_open: bool | None = None
        self.in_process = False
        self.config: str | None = None
        self.timeout = 600.0


_VALUE_FLAGS = {"--socket", "--url", "--token-file", "--fallback", "--config", "--timeout"}


def fast_hook_options(words: "Sequence[str]") -> "HookOptions | None":
    """`hook EVENT [flags]` parsed without argparse (~10 ms of imports), or None when the
    words need argparse (help, a mistake, an unusual spelling) for its messages."""
    if len(words) < 2 or words[0] != "hook" or words[1].startswith("-"):
        return None
    options = HookOptions(words[1])
    index = 2
    while index < len(words):
        word = words[index]
        name, eq, inline = word.partition("=")
        if name in _VALUE_FLAGS:
            if eq:
                value = inline
            elif index + 1 < len(words) and not words[index + 1].startswith("-"):
                index += 1
                value = words[index]
            else:
                return None  # argparse says what is missing (or takes a negative number)
            if name == "--timeout":
                try:
                    options.timeout = float(value)
                except ValueError:
                    return None
                if not 0 < options.timeout < 1e9:  # also refuses nan
                    return None
            elif name == "--fallback":
                if value not in ("none", "in-process"):
                    return None
                options.fallback = value
            else:
                setattr(options, name[2:].replace("-", "_"), value)
        elif word == "--exit-code":
            options.exit_code = True
        elif word == "--fail-closed":
            options.fail_closed = True
        elif word == "--fail-open":
            options.fail_open = True
        elif word == "--in-process":
            options.in_process = True
        else:
            return None
        index += 1
    if (options.socket and options.url) or (options.fail_closed and options.fail_open):
        return None
    return options


def add_hook_arguments(parser: "argparse.ArgumentParser") -> None:
    from cloudrunner.protocol.event_names import BEFORE_SHELL_EXECUTION

    parser.add_argument(
        "event", metavar="EVENT", help=f"the hook event name ({BEFORE_SHELL_EXECUTION}, ...)"
    )
    add_endpoint_arguments(parser)
    parser.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 2 on a block, like a single hook (the answer is still printed)",
    )
    parser.add_argument(
        "--fallback",
        choices=("none", "in-process"),
        default=None,
        help="with no daemon: run the event in this process (in-process), or answer by the "
        "policy (none, the default; CLOUDRUNNER_FALLBACK)",
    )
    policy = parser.add_mutually_exclusive_group()
    policy.add_argument(
        "--fail-closed",
        action="store_true",
        default=None,
        help="when no daemon answers, block the event (events that can block), whatever the "
        "daemon's published fail policy says (CLOUDRUNNER_FAIL_CLOSED=1)",
    )
    policy.add_argument(
        "--fail-open",
        action="store_true",
        default=None,
        help="when no daemon answers, let the event through, whatever the daemon's published "
        "fail policy says (CLOUDRUNNER_FAIL_CLOSED=0)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the event in this process without asking a daemon (what --fallback "
        "in-process does once no daemon answers; cloudrunner-hook runs this)",
    )
    parser.add_argument("--config", metavar="FILE", help="settings file for --fallback in-process")
    parser.add_argument(
        "--timeout", type=seconds_above_zero, default=600.0, metavar="SECONDS",
        help="how long to wait for the answer (default 600)",
    )  # fmt: skip


class _Policy:
    """What the fail policy needs besides the problem: the event, its bytes, the overrides."""

    __slots__ = ("endpoint", "env", "event", "exit_code", "flag", "payload")

    def __init__(
        self, event: str, flag: "bool | None", env: "bool | None", endpoint: Endpoint,
        exit_code: bool,
    ) -> None:  # fmt: skip
        self.event = event
        self.flag = flag
        self.env = env
        self.endpoint = endpoint
        self.exit_code = exit_code
        self.payload = b""


def _env_fail_closed() -> "bool | None":
    """CLOUDRUNNER_FAIL_CLOSED: 1/true/yes closed, 0/false/no open, unset or empty None."""
    value = env_var("CLOUDRUNNER_FAIL_CLOSED")
    if not value:
        return None
    if value.lower() in ("1", "true", "yes"):
        return True
    if value.lower() in ("0", "false", "no"):
        return False
    raise UsageError(
        f"CLOUDRUNNER_FAIL_CLOSED={value!r} must be 1, true or yes (fail closed) "
        "or 0, false or no (fail open)"
    )


def hook_command(args: "HookOptions | argparse.Namespace") -> int:
    event: str = args.event
    if bad_event_name(event):
        from cloudrunner.protocol.event_names import BEFORE_SHELL_EXECUTION

        return usage_error(
            f"EVENT {event!r} is not a hook event name (ASCII letters and digits, "
            f"like {BEFORE_SHELL_EXECUTION})"
        )
    flag = True if args.fail_closed else False if args.fail_open else None
    fallback = args.fallback or env_var("CLOUDRUNNER_FALLBACK") or "none"
    if fallback not in ("none", "in-process"):
        return usage_error(f"CLOUDRUNNER_FALLBACK={fallback!r} must be none or in-process")
    try:
        env = _env_fail_closed()
        endpoint = endpoint_from(args.socket, args.url, args.token_file)
    except UsageError as exc:
        return usage_error(str(exc))
    if sys.stdin is None:  # the agent closed descriptor 0 before starting the client
        return usage_error("cloudrunner hook reads the event JSON on stdin, and stdin is closed")
    if sys.stdin.isatty():
        return usage_error("cloudrunner hook reads the event JSON on stdin; pipe it in")
    policy = _Policy(event, flag, env, endpoint, args.exit_code)
    try:
        payload = policy.payload = sys.stdin.buffer.read()
    except OSError as exc:  # a directory, a descriptor opened for writing only, ...
        return usage_error(f"cannot read the event JSON on stdin ({os_text(exc)})")
    if args.in_process:
        return _in_process(payload, args, policy)
    problem: str
    try:
        reply = request(
            endpoint,
            "POST",
            f"/v1/events/{event}",
            payload,
            timeout_s=args.timeout,
            trace=traceparent(),
        )
    except (Unreachable, ValueError) as exc:
        problem = str(exc)
    else:
        if reply.status == 200:
            blocked = reply.headers.get(BLOCKED_HEADER) == "true"
            return _answer(reply.body, args.exit_code and blocked)
        code, message = _error_of(reply)
        if code != DRAINING_CODE:
            # The daemon is up and refused the event (and recorded it or said why it could
            # not): the policy answers, no fallback, nothing spooled.
            return _by_policy(policy, f"the daemon refused the event: {message}", spool=False)
        problem = message
    if fallback == "in-process":
        print(f"cloudrunner: {problem}; running the event in process", file=sys.stderr)
        return _in_process(payload, args, policy)
    return _by_policy(policy, problem, spool=True)


def _answer(body: bytes, blocked: bool) -> int:
    """Print the answer; with `blocked` (a block under --exit-code), its message goes to
    stderr and the exit code is 2, like a single hook's."""
    sys.stdout.buffer.write(body if body.endswith(b"\n") else body + b"\n")
    sys.stdout.flush()
    if blocked:
        print(_block_message(body), file=sys.stderr)
        return 2
    return 0


def _block_message(body: bytes) -> str:
    import json

    try:
        answer = json.loads(body)
    except ValueError:
        answer = {}
    for key in ("agent_message", "user_message"):
        value = answer.get(key) if isinstance(answer, dict) else None
        if isinstance(value, str) and value:
            return value
    return "blocked by cloudrunner"


def _error_of(reply: HttpReply) -> tuple[str, str]:
    import json

    try:
        error = json.loads(reply.body)["error"]
        code, message = error["code"], error["message"]
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):
        code = message = None
    if isinstance(code, str) and isinstance(message, str):
        return code, message
    text = reply.body.decode(errors="replace").strip()[:200]
    return "http-" + str(reply.status), f"HTTP {reply.status}: {text}"


def _by_policy(policy: _Policy, problem: str, *, spool: bool) -> int:
    """The answer without the daemon's: blocked or neutral per the fail policy, said on
    stderr, and (`spool`: no daemon answered at all) appended to the fallback spool."""
    import json

    from cloudrunner.client import no_daemon
    from cloudrunner.protocol.event_names import BLOCKING_EVENTS

    event = policy.event
    directory = no_daemon.run_dir(policy.endpoint)
    decision = no_daemon.decide(event, policy.flag, policy.env, directory)
    blocked = decision.closed and event in BLOCKING_EVENTS
    if blocked:
        message = (
            f"cloudrunner could not run the hooks, so this is blocked (fail-closed): {problem}"
        )
        answer = blocked_answer(event, message)
        line = f"cloudrunner: {problem}; blocking (fail-closed)"
        if decision.decided_by == "policy":
            line += f" (a failClosed hook is configured for {event}, per {decision.policy_path})"
    else:
        answer = neutral_answer(event)
        line = f"cloudrunner: {problem}; letting the event through (fail-open)"
    print(line, file=sys.stderr)
    for note in decision.notes:
        print(note, file=sys.stderr)
    if spool:
        record = no_daemon.spool_line(event, answer, blocked, problem, decision, policy.payload)
        unrecorded = no_daemon.append_spool(directory, record)
        if unrecorded:
            print(unrecorded, file=sys.stderr)
    body = json.dumps(answer, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return _answer(body.encode("utf-8", "replace"), policy.exit_code and blocked)


def _in_process(payload: bytes, args: "HookOptions | argparse.Namespace", policy: _Policy) -> int:
    """The slow path: no daemon, so run the event here (imports the whole worker)."""
    event = policy.event
    import json
    from pathlib import Path

    from cloudrunner.errors import CloudrunnerError
    from cloudrunner.logs import configure_logging
    from cloudrunner.settings import load_settings
    from cloudrunner.worker import Worker

    try:
        configure_logging()
        settings = load_settings(Path(args.config) if args.config else None)
        with Worker(settings) as worker:
            reply = worker.handle(payload, event)
    except CloudrunnerError as exc:
        return _by_policy(policy, exc.message, spool=False)
    body = json.dumps(reply.answer, ensure_ascii=False).encode()
    return _answer(body, args.exit_code and blocks(reply.answer))


def _usage_parser() -> "type[argparse.ArgumentParser]":
    """argparse, but a mistake is one line and exit 64 (EX_USAGE), like cloudrunner-hook."""
    import argparse

    class UsageParser(argparse.ArgumentParser):
        def __init__(self, *args: "Any", **kwargs: "Any") -> None:
            kwargs.setdefault("allow_abbrev", False)  # --exit is no --exit-code in either
            super().__init__(*args, **kwargs)

        def error(self, message: str) -> "NoReturn":
            print(f"cloudrunner: error: {message}", file=sys.stderr)
            raise SystemExit(64)

    return UsageParser


def main(argv: "Sequence[str]") -> int:
    """`cloudrunner hook ...` / `cloudrunner health ...`, parsed without the full CLI."""
    try:
        options = fast_hook_options(argv)
        if options is not None:
            return hook_command(options)
        from cloudrunner.commands import health

        parser = _usage_parser()(prog="cloudrunner")
        sub = parser.add_subparsers(dest="command", required=True)
        add_hook_arguments(sub.add_parser("hook", help="the per-event client"))
        health.add_health_arguments(sub.add_parser("health", help="check the daemon"))
        args = parser.parse_args(argv)
        if args.command == "hook":
            return hook_command(args)
        return health.health_command(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: exit 70, its traceback in a file
        from cloudrunner.crash import report_bug

        return report_bug(exc)
