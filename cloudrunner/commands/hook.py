"""`cloudrunner hook EVENT`: the per-event client. Event JSON on stdin, the daemon's
merged answer on stdout, exit 0 (with `--exit-code`, exit 2 on a block, like a single
hook). `main` here is also the entry for `cloudrunner health` (cloudrunner/commands/health.py):
the launcher and `cloudrunner.cli.main` hand both words straight to it.

When no daemon answers, it runs the event in process if allowed (`--fallback
in-process`), and otherwise answers by the policy: fail-open (the neutral answer) or,
with `--fail-closed`, a block on events that can block; either way with one line on
stderr saying what is down.

Like cloudrunner/client.py (the transport), this module starts on every agent step:
the success path imports only the standard library (no argparse: the flags are parsed by
hand unless something unusual needs argparse's messages; no json, no os, no typing).
"""

# No `from __future__ import annotations`: importing __future__ costs the fast path ~0.1 ms.
# Annotations naming what only type checkers import are strings instead.
import sys

from cloudrunner.client import (
    BLOCKED_HEADER,
    BLOCKING_EVENTS,
    DEFAULT_STATE_DIR,
    SOCKET_NAME,
    HttpReply,
    Unreachable,
    UsageError,
    blocked_answer,
    blocks,
    endpoint_from,
    env_var,
    neutral_answer,
    request,
)

TYPE_CHECKING = False  # typing itself costs ~10 ms to import; mypy honours this name
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence


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
        "fallback",
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
            elif index + 1 < len(words):
                index += 1
                value = words[index]
            else:
                return None
            if name == "--timeout":
                try:
                    options.timeout = float(value)
                except ValueError:
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
        else:
            return None
        index += 1
    if options.socket and options.url:
        return None
    return options


def add_hook_arguments(parser: "argparse.ArgumentParser") -> None:
    parser.add_argument(
        "event", metavar="EVENT", help="the hook event name (beforeShellExecution, ...)"
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
    parser.add_argument(
        "--fail-closed",
        action="store_true",
        default=None,
        help="when the event cannot be answered, block it (events that can block) instead of "
        "letting it through (CLOUDRUNNER_FAIL_CLOSED=1)",
    )
    parser.add_argument("--config", metavar="FILE", help="settings file for --fallback in-process")
    parser.add_argument(
        "--timeout", type=float, default=600.0, metavar="SECONDS",
        help="how long to wait for the answer (default 600)",
    )  # fmt: skip


def add_endpoint_arguments(parser: "argparse.ArgumentParser") -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--socket", metavar="PATH",
        help="the daemon's unix socket (CLOUDRUNNER_SOCKET; default "
        f"$CLOUDRUNNER_STATE_DIR/{SOCKET_NAME}, state dir {DEFAULT_STATE_DIR})",
    )  # fmt: skip
    where.add_argument(
        "--url", metavar="http://HOST:PORT", help="the daemon's TCP address (CLOUDRUNNER_URL)"
    )
    parser.add_argument(
        "--token-file", metavar="FILE", help="bearer token for --url (CLOUDRUNNER_TOKEN_FILE)"
    )


def hook_command(args: "HookOptions | argparse.Namespace") -> int:
    event: str = args.event
    closed_env = (env_var("CLOUDRUNNER_FAIL_CLOSED") or "").lower()
    fail_closed = bool(args.fail_closed) or closed_env in ("1", "true", "yes")
    fallback = args.fallback or env_var("CLOUDRUNNER_FALLBACK") or "none"
    if fallback not in ("none", "in-process"):
        return usage_error(f"CLOUDRUNNER_FALLBACK={fallback!r} must be none or in-process")
    try:
        endpoint = endpoint_from(args.socket, args.url, args.token_file)
    except UsageError as exc:
        return usage_error(str(exc))
    if sys.stdin.isatty():
        return usage_error("cloudrunner hook reads the event JSON on stdin; pipe it in")
    payload = sys.stdin.buffer.read()
    problem: str
    try:
        reply = request(endpoint, "POST", f"/v1/events/{event}", payload, timeout_s=args.timeout)
    except (Unreachable, ValueError) as exc:
        problem = str(exc)
    else:
        if reply.status == 200:
            blocked = reply.headers.get(BLOCKED_HEADER) == "true"
            return _answer(reply.body, args.exit_code and blocked)
        code, message = _error_of(reply)
        if code != "draining":
            # The daemon is up and refused the event: the policy answers, no fallback.
            return _by_policy(event, f"the daemon refused the event: {message}", fail_closed,
                              args.exit_code)  # fmt: skip
        problem = message
    if fallback == "in-process":
        return _in_process(event, payload, args, problem, fail_closed)
    return _by_policy(event, problem, fail_closed, args.exit_code)


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
        data = json.loads(reply.body)
        error = data["error"]
        return str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        text = reply.body.decode(errors="replace").strip()[:200]
        return "http-" + str(reply.status), f"HTTP {reply.status}: {text}"


def _by_policy(event: str, problem: str, fail_closed: bool, exit_code: bool) -> int:
    import json

    if fail_closed and event in BLOCKING_EVENTS:
        message = (
            f"cloudrunner could not run the hooks, so this is blocked (fail-closed): {problem}"
        )
        answer = blocked_answer(event, message)
        print(f"cloudrunner: {problem}; blocking (fail-closed)", file=sys.stderr)
        return _answer(json.dumps(answer).encode(), exit_code)
    answer = neutral_answer(event)
    print(f"cloudrunner: {problem}; letting the event through (fail-open)", file=sys.stderr)
    return _answer(json.dumps(answer).encode(), False)


def _in_process(
    event: str,
    payload: bytes,
    args: "HookOptions | argparse.Namespace",
    problem: str,
    fail_closed: bool,
) -> int:
    """The slow path: no daemon, so run the event here (imports the whole worker)."""
    print(f"cloudrunner: {problem}; running the event in process", file=sys.stderr)
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
        return _by_policy(event, exc.message, fail_closed, args.exit_code)
    body = json.dumps(reply.answer, ensure_ascii=False).encode()
    return _answer(body, args.exit_code and blocks(reply.answer))


def usage_error(message: str) -> int:
    print(f"cloudrunner: error: {message}", file=sys.stderr)
    return 64


def main(argv: "Sequence[str]") -> int:
    """`cloudrunner hook ...` / `cloudrunner health ...`, parsed without the full CLI."""
    try:
        options = fast_hook_options(argv)
        if options is not None:
            return hook_command(options)
        import argparse

        from cloudrunner.commands import health

        parser = argparse.ArgumentParser(prog="cloudrunner")
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
