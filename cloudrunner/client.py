"""The per-event client, `cloudrunner hook EVENT`, and `cloudrunner health`.

This module imports only the standard library: it starts on every agent step, so it
speaks HTTP/1.1 over a raw socket itself (no http.client, no json beyond the answer) and
reaches the daemon in a few milliseconds. It speaks the hook protocol upward: the event
JSON on stdin, the merged answer on stdout, exit 0 (with `--exit-code`, exit 2 on a
block, like a single hook).

When no daemon answers, it runs the event in process if allowed (`--fallback
in-process`), and otherwise answers by the policy: fail-open (the neutral answer) or,
with `--fail-closed`, a block on events that can block; either way with one line on
stderr saying what is down.
"""

# No `from __future__ import annotations`: importing __future__ costs the fast path ~0.1 ms.
# Annotations naming what only type checkers import are strings instead.
import _socket  # `socket` costs ~10 ms of imports (enum, selectors); the C module ~0.3 ms
import sys

# `os` costs ~0.9 ms to import (collections.abc, posixpath) when the interpreter runs
# without `site` (`python3 -IS`, see launcher/cloudrunner); `posix.environ` is the very
# dict behind `os.environ` (bytes), so changes made through either are seen here.
from posix import environ as _environ

TYPE_CHECKING = False  # typing itself costs ~10 ms to import; mypy honours this name
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

DEFAULT_STATE_DIR = "/var/lib/cloudrunner"
SOCKET_NAME = "cloudrunner.sock"
#: the daemon marks an answer that blocks, so the client need not parse it (json costs ~4 ms)
BLOCKED_HEADER = "x-cloudrunner-blocked"

#: events that can block: how a block reads (the decision field, where its message goes).
#: A unit test checks this against the protocol core, which the fast path cannot import.
BLOCKING_EVENTS: dict[str, tuple[str, str | None]] = {
    "beforeMCPExecution": ("permission", "agent_message"),
    "beforeReadFile": ("permission", "user_message"),
    "beforeShellExecution": ("permission", "agent_message"),
    "beforeSubmitPrompt": ("continue", "user_message"),
    "beforeTabFileRead": ("permission", None),
    "preToolUse": ("permission", "agent_message"),
    "subagentStart": ("permission", "user_message"),
}


class Unreachable(Exception):
    """No daemon answered (no socket, refused, timed out, or it is shutting down)."""


class Endpoint:
    """Where the daemon listens: a unix socket path, or a TCP host and port (with a token)."""

    __slots__ = ("host", "port", "socket_path", "token")

    def __init__(
        self, socket_path: str | None, host: str = "", port: int = 0, token: str | None = None
    ) -> None:
        self.socket_path = socket_path
        self.host = host
        self.port = port
        self.token = token

    def describe(self) -> str:
        return f"unix:{self.socket_path}" if self.socket_path else f"http://{self.host}:{self.port}"


class HttpReply:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


def _connect(endpoint: Endpoint, timeout_s: float) -> _socket.socket:
    if endpoint.socket_path is not None:
        # A full listen backlog answers EAGAIN on a unix socket: wait a little and retry.
        for attempt in range(50):
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            sock.settimeout(timeout_s)
            try:
                sock.connect(endpoint.socket_path)
            except BlockingIOError:
                sock.close()
                if attempt == 49:
                    raise
                import time

                time.sleep(0.02 * (attempt + 1))
                continue
            except BaseException:
                sock.close()
                raise
            return sock
    last: OSError = ConnectionRefusedError("no address")
    for family, kind, proto, _, address in _socket.getaddrinfo(
        endpoint.host, endpoint.port, 0, _socket.SOCK_STREAM
    ):
        sock = _socket.socket(family, kind, proto)
        sock.settimeout(timeout_s)
        try:
            sock.connect(address)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        return sock
    raise last


def request(
    endpoint: Endpoint,
    method: str,
    path: str,
    body: bytes = b"",
    *,
    timeout_s: float = 600.0,
    connect_timeout_s: float = 5.0,
) -> HttpReply:
    """One HTTP/1.1 request with `Connection: close`; raises Unreachable when nothing
    answers, ValueError when the answer is not HTTP."""
    try:
        sock = _connect(endpoint, connect_timeout_s)
    except OSError as exc:
        raise Unreachable(
            f"no daemon answers on {endpoint.describe()} ({_os_reason(exc)})"
        ) from None
    try:
        sock.settimeout(timeout_s)
        head = [
            f"{method} {path} HTTP/1.1",
            "Host: cloudrunner",
            "Connection: close",
            f"Content-Length: {len(body)}",
        ]
        if body:
            head.append("Content-Type: application/json")
        if endpoint.token:
            head.append(f"Authorization: Bearer {endpoint.token}")
        chunks: list[bytes] = []
        try:
            try:  # noqa: SIM105 (contextlib costs the fast path ~2 ms of imports)
                sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the daemon may have answered early (a body over its cap): read that
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except TimeoutError:
            raise Unreachable(
                f"the daemon on {endpoint.describe()} did not answer within {timeout_s:g}s"
            ) from None
        except OSError as exc:
            raise Unreachable(
                f"the daemon on {endpoint.describe()} dropped the connection ({_os_reason(exc)})"
            ) from None
    finally:
        sock.close()
    return _parse(b"".join(chunks), endpoint)


def _parse(raw: bytes, endpoint: Endpoint) -> HttpReply:
    head, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        raise Unreachable(f"the daemon on {endpoint.describe()} closed without an answer")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"{endpoint.describe()} does not speak HTTP: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length", "")
    body = rest[: int(length)] if length.isdigit() else rest
    return HttpReply(int(parts[1]), headers, body)


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "the socket does not exist"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, PermissionError):
        return "permission denied on the socket"
    return exc.strerror or type(exc).__name__


# --------------------------------------------------------------------------- endpoint


def _env(name: str) -> str | None:
    """An environment variable as `os.environ` would give it."""
    value = _environ.get(name.encode())
    return None if value is None else value.decode("utf-8", "surrogateescape")


class UsageError(Exception):
    """A flag or variable the client cannot use."""


def endpoint_from(
    socket_flag: str | None, url_flag: str | None, token_file_flag: str | None
) -> Endpoint:
    """--socket / --url, else CLOUDRUNNER_SOCKET / CLOUDRUNNER_URL, else the default socket."""
    url = url_flag or (None if socket_flag else _env("CLOUDRUNNER_URL"))
    if url:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise UsageError(
                f"--url {url!r} must be http://HOST:PORT (the daemon's --listen address)"
            )
        token_file = token_file_flag or _env("CLOUDRUNNER_TOKEN_FILE")
        token = None
        if token_file:
            try:
                with open(token_file, encoding="utf-8") as handle:
                    token = handle.read().strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"cannot read the token file {token_file}: {exc}") from None
        try:
            port = parts.port or 80
        except ValueError:
            raise UsageError(f"--url {url!r} has a bad port") from None
        return Endpoint(None, parts.hostname, port, token)
    path = socket_flag or _env("CLOUDRUNNER_SOCKET")
    if not path:
        state = _env("CLOUDRUNNER_STATE_DIR") or DEFAULT_STATE_DIR
        path = state + SOCKET_NAME if state.endswith("/") else f"{state}/{SOCKET_NAME}"
    return Endpoint(path)


# --------------------------------------------------------------------------- answers


def neutral_answer(event: str) -> "dict[str, Any]":
    decision = BLOCKING_EVENTS.get(event, ("", None))[0]
    if decision == "permission":
        return {"permission": "allow"}
    if decision == "continue":
        return {"continue": True}
    return {}


def blocked_answer(event: str, message: str) -> "dict[str, Any]":
    """The block a failClosed hook would give (the neutral answer where nothing can block)."""
    if event not in BLOCKING_EVENTS:
        return {}
    decision, field = BLOCKING_EVENTS[event]
    answer: dict[str, Any] = (
        {"permission": "deny"} if decision == "permission" else {"continue": False}
    )
    if field is not None:
        answer[field] = message
    return answer


def blocks(answer: "Any") -> bool:
    return isinstance(answer, dict) and (
        answer.get("permission") == "deny" or answer.get("continue") is False
    )


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


# --------------------------------------------------------------------------- hook


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
    _add_endpoint_arguments(parser)
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


def _add_endpoint_arguments(parser: "argparse.ArgumentParser") -> None:
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
    closed_env = (_env("CLOUDRUNNER_FAIL_CLOSED") or "").lower()
    fail_closed = bool(args.fail_closed) or closed_env in ("1", "true", "yes")
    fallback = args.fallback or _env("CLOUDRUNNER_FALLBACK") or "none"
    if fallback not in ("none", "in-process"):
        return _usage(f"CLOUDRUNNER_FALLBACK={fallback!r} must be none or in-process")
    try:
        endpoint = endpoint_from(args.socket, args.url, args.token_file)
    except UsageError as exc:
        return _usage(str(exc))
    if sys.stdin.isatty():
        return _usage("cloudrunner hook reads the event JSON on stdin; pipe it in")
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


def _usage(message: str) -> int:
    print(f"cloudrunner: error: {message}", file=sys.stderr)
    return 64


# --------------------------------------------------------------------------- health


def add_health_arguments(parser: "argparse.ArgumentParser") -> None:
    _add_endpoint_arguments(parser)
    parser.add_argument(
        "--ready", action="store_true", help="check /readyz (engine and images) instead of /healthz"
    )
    parser.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS")


def health_command(args: "argparse.Namespace") -> int:
    import json

    try:
        endpoint = endpoint_from(args.socket, args.url, args.token_file)
    except UsageError as exc:
        return _usage(str(exc))
    path = "/readyz" if args.ready else "/healthz"
    try:
        reply = request(
            endpoint, "GET", path, timeout_s=args.timeout, connect_timeout_s=args.timeout
        )
    except (Unreachable, ValueError) as exc:
        print(f"cloudrunner: unhealthy: {exc}", file=sys.stderr)
        return 1
    if reply.status == 200:
        print(reply.body.decode(errors="replace").strip())
        return 0
    try:
        reason = json.loads(reply.body).get("reason") or reply.body.decode(errors="replace")
    except (ValueError, AttributeError):
        reason = reply.body.decode(errors="replace")
    state = "ready" if args.ready else "healthy"
    print(f"cloudrunner: not {state} (HTTP {reply.status}): {str(reason).strip()[:300]}",
          file=sys.stderr)  # fmt: skip
    return 1


# --------------------------------------------------------------------------- entry


def main(argv: "Sequence[str]") -> int:
    """`cloudrunner hook ...` / `cloudrunner health ...`, parsed without the full CLI."""
    try:
        options = fast_hook_options(argv)
        if options is not None:
            return hook_command(options)
        import argparse

        parser = argparse.ArgumentParser(prog="cloudrunner")
        sub = parser.add_subparsers(dest="command", required=True)
        add_hook_arguments(sub.add_parser("hook", help="the per-event client"))
        add_health_arguments(sub.add_parser("health", help="check the daemon"))
        args = parser.parse_args(argv)
        if args.command == "hook":
            return hook_command(args)
        return health_command(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
