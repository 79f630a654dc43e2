"""The per-event client's transport, behind `cloudrunner hook EVENT` and `cloudrunner health`
(their flags and handlers are cloudrunner/commands/hook.py and health.py); its answer when
no daemon answers is the submodule `no_daemon`, imported only then.

This module imports only the standard library (and, when no daemon answers, the table of
blocking events in `cloudrunner.protocol.event_names`, which is literals): `cloudrunner
hook` starts on every agent step, so it speaks HTTP/1.1 over a raw socket itself (no
http.client, no json beyond the answer) and reaches the daemon in a few milliseconds.
Here: the endpoint (flags, then the environment), one request, and the answers the client
gives by policy when no daemon answers (fail-open: the neutral answer; fail-closed: a block
on events that can block).
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
    from typing import Any

__all__ = [
    "ANSWER_HEAD_MAX_BYTES",
    "ANSWER_MAX_BYTES",
    "BLOCKED_HEADER",
    "BLOCKING_EVENTS",
    "DEFAULT_STATE_DIR",
    "DRAINING_CODE",
    "SOCKET_NAME",
    "SOCKET_PATH_MAX_BYTES",
    "Endpoint",
    "HttpReply",
    "SocketPathTooLong",
    "Unreachable",
    "UsageError",
    "add_endpoint_arguments",
    "bad_event_name",
    "bearer_token_ok",
    "blocked_answer",
    "blocks",
    "endpoint_from",
    "env_var",
    "neutral_answer",
    "os_text",
    "request",
    "seconds_above_zero",
    "traceparent",
    "usage_error",
]

DEFAULT_STATE_DIR = "/var/lib/cloudrunner"
SOCKET_NAME = "cloudrunner.sock"
#: the daemon marks an answer that blocks, so the client need not parse it (json costs ~4 ms)
BLOCKED_HEADER = "x-cloudrunner-blocked"

#: the error code of a daemon that is shutting down: the event was not taken, so it counts
#: as no answer (spooled, or run in process). A unit test checks it against the table of
#: error codes (`cloudrunner.refusals`), which the fast path cannot import (enum).
DRAINING_CODE = "draining"


class Unreachable(Exception):
    """No daemon answered (no socket, refused, timed out, or it is shutting down)."""


def bearer_token_ok(token: str) -> bool:
    """A token travels in an HTTP header: visible ASCII characters only (no space, no
    control character that could end the header and start another)."""
    return all("!" <= ch <= "~" for ch in token)


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


#: the longest unix socket path the kernel takes (sun_path holds 108 bytes with its NUL)
SOCKET_PATH_MAX_BYTES = 107
#: what one answer may make the client read (the compiled client's caps too): the head, and
#: the whole answer; a daemon's head is a few hundred bytes and its answers far below the cap
ANSWER_HEAD_MAX_BYTES = 64 << 10
ANSWER_MAX_BYTES = 64 << 20


class SocketPathTooLong(OSError):
    pass


def _connect(endpoint: Endpoint, timeout_s: float) -> _socket.socket:
    if endpoint.socket_path is not None:
        if len(endpoint.socket_path.encode("utf-8", "surrogateescape")) > SOCKET_PATH_MAX_BYTES:
            raise SocketPathTooLong()
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
    trace: str | None = None,
) -> HttpReply:
    """One HTTP/1.1 request with `Connection: close`; raises Unreachable when nothing
    answers, ValueError when the answer is not HTTP. `trace`: a `traceparent` header's
    value (see `traceparent`)."""
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
        if trace:
            head.append(f"traceparent: {trace}")
        chunks: list[bytes] = []
        try:
            try:  # noqa: SIM105 (contextlib costs the fast path ~2 ms of imports)
                sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the daemon may have answered early (a body over its cap): read that
            received = 0
            head_ended = False
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                received += len(chunk)
                if not head_ended:
                    head_ended = _head_within_cap(b"".join(chunks), endpoint)
                if received > ANSWER_MAX_BYTES:
                    raise Unreachable(
                        f"the daemon on {endpoint.describe()} sent an answer over "
                        f"{ANSWER_MAX_BYTES} bytes (a cloudrunner daemon's are far smaller)"
                    )
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


def _head_within_cap(raw: bytes, endpoint: Endpoint) -> bool:
    """True once the head (status line, headers, blank line) has ended within its cap;
    False while it may still end; Unreachable when it is over the cap."""
    end = raw.find(b"\r\n\r\n", 0, ANSWER_HEAD_MAX_BYTES + 4)
    if end != -1 and end + 4 <= ANSWER_HEAD_MAX_BYTES:
        return True
    if len(raw) < ANSWER_HEAD_MAX_BYTES:
        return False
    raise Unreachable(
        f"the daemon on {endpoint.describe()} sent an answer whose head is over "
        f"{ANSWER_HEAD_MAX_BYTES} bytes (a cloudrunner daemon's is a few hundred)"
    )


def _parse(raw: bytes, endpoint: Endpoint) -> HttpReply:
    if raw and not b"HTTP/".startswith(raw[:5]):
        raise ValueError(f"{endpoint.describe()} does not speak HTTP")
    head, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        raise Unreachable(f"the daemon on {endpoint.describe()} closed without an answer")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"{endpoint.describe()} does not speak HTTP")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length", "")
    if length.isdigit() and len(rest) < int(length):
        raise Unreachable(
            f"the daemon on {endpoint.describe()} dropped the connection (the answer was cut short)"
        )
    body = rest[: int(length)] if length.isdigit() else rest
    return HttpReply(int(parts[1]), headers, body)


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, SocketPathTooLong):
        return f"the socket path is longer than {SOCKET_PATH_MAX_BYTES} bytes"
    if isinstance(exc, FileNotFoundError):
        return "the socket does not exist"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, PermissionError):
        return "permission denied on the socket"
    return os_text(exc)


def os_text(exc: OSError) -> str:
    """The error's text in lower case, no errno number (as the compiled client says it)."""
    text = exc.strerror or type(exc).__name__
    return text[:1].lower() + text[1:]


def bad_event_name(event: str) -> bool:
    """Event names are ASCII letters and digits (they go into the request's path)."""
    return not (0 < len(event) <= 64 and event.isascii() and event.isalnum())


# --------------------------------------------------------------------------- endpoint


def env_var(name: str) -> str | None:
    """An environment variable as `os.environ` would give it."""
    value = _environ.get(name.encode())
    return None if value is None else value.decode("utf-8", "surrogateescape")


class UsageError(Exception):
    """A flag or variable the client cannot use."""


def endpoint_from(
    socket_flag: str | None, url_flag: str | None, token_file_flag: str | None
) -> Endpoint:
    """--socket / --url, else CLOUDRUNNER_SOCKET / CLOUDRUNNER_URL, else the default socket."""
    url = url_flag or (None if socket_flag else env_var("CLOUDRUNNER_URL"))
    if url:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise UsageError(
                f"--url {url!r} must be http://HOST:PORT (the daemon's --listen address)"
            )
        token_file = token_file_flag or env_var("CLOUDRUNNER_TOKEN_FILE")
        token = None
        if token_file:
            try:
                with open(token_file, encoding="utf-8") as handle:
                    token = handle.read().strip()
            except OSError as exc:
                raise UsageError(
                    f"cannot read the token file {token_file} ({os_text(exc)})"
                ) from None
            except UnicodeDecodeError:
                raise UsageError(
                    f"cannot read the token file {token_file} (it is not UTF-8 text)"
                ) from None
            if not bearer_token_ok(token):
                raise UsageError(
                    f"the token file {token_file} holds a character a bearer token cannot carry "
                    "(a space, a control character or non-ASCII); write the daemon's token "
                    "there, visible ASCII characters only"
                )
        try:
            port = 80 if parts.port is None else parts.port
        except ValueError:
            port = 0
        if not port:
            raise UsageError(f"--url {url!r} has a bad port")
        return Endpoint(None, parts.hostname, port, token)
    path = socket_flag or env_var("CLOUDRUNNER_SOCKET")
    if not path:
        state = env_var("CLOUDRUNNER_STATE_DIR") or DEFAULT_STATE_DIR
        path = state + SOCKET_NAME if state.endswith("/") else f"{state}/{SOCKET_NAME}"
    return Endpoint(path)


_HEX = "0123456789abcdef"


def traceparent() -> str | None:
    """The agent's TRACEPARENT when it has the W3C traceparent shape (VERSION-TRACEID-
    PARENTID-FLAGS in lowercase hex), to pass on so the agent's trace continues through the
    hooks; None when unset or of another shape (the daemon checks the rest). The compiled
    client does the same."""
    value = env_var("TRACEPARENT")
    if not value:
        return None
    value = value.strip(" \t")
    if len(value) > 512 or not all("!" <= ch <= "~" for ch in value):
        return None  # a header carries visible ASCII only
    fields = value.split("-")
    if len(fields) < 4 or [len(f) for f in fields[:4]] != [2, 32, 16, 2]:
        return None
    if not all(ch in _HEX for ch in "".join(fields[:4])) or fields[0] == "ff":
        return None
    if fields[0] == "00" and len(fields) != 4:
        return None
    return value


# --------------------------------------------------------------------------- answers


def __getattr__(name: str) -> "Any":
    """`BLOCKING_EVENTS`, the events that can block and how a block reads (the decision
    field, where its message goes), is defined with the other event names
    (`cloudrunner.protocol.event_names`) and imported only when asked for: only answers
    given without a daemon need it, so a daemon's answer does not pay for its import."""
    if name == "BLOCKING_EVENTS":
        from cloudrunner.protocol.event_names import BLOCKING_EVENTS

        return BLOCKING_EVENTS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def neutral_answer(event: str) -> "dict[str, Any]":
    from cloudrunner.protocol.event_names import BLOCKING_EVENTS

    decision = BLOCKING_EVENTS.get(event, ("", None))[0]
    if decision == "permission":
        return {"permission": "allow"}
    if decision == "continue":
        return {"continue": True}
    return {}


def blocked_answer(event: str, message: str) -> "dict[str, Any]":
    """The block a failClosed hook would give (the neutral answer where nothing can block)."""
    from cloudrunner.protocol.event_names import BLOCKING_EVENTS

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


# ---------------------------------------------------------------- the command line
# What `cloudrunner hook` and `cloudrunner health` (cloudrunner/commands/) share.


def usage_error(message: str) -> int:
    print(f"cloudrunner: error: {message}", file=sys.stderr)
    return 64


def seconds_above_zero(text: str) -> float:
    """--timeout's value: a number of seconds above 0 (both clients say the same)."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


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
