"""`cloudrunner health [--ready]`: exit 0 when the daemon is healthy (or ready), else 1
with the reason on stderr. Reached through `cloudrunner.commands.hook.main`, like `hook`,
without the rest of the package: the standard library only."""

# No `from __future__ import annotations` (see cloudrunner/commands/hook.py).
import sys

from cloudrunner.client import (
    Unreachable,
    UsageError,
    add_endpoint_arguments,
    endpoint_from,
    request,
    seconds_above_zero,
    usage_error,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`health` in the full parser, for --help and the reference: `hook.main` parses it."""
    parser = sub.add_parser("health", help="exit 0 when the daemon is healthy (or --ready)")
    add_health_arguments(parser)
    parser.set_defaults(handler=health_command)


def add_health_arguments(parser: "argparse.ArgumentParser") -> None:
    add_endpoint_arguments(parser)
    parser.add_argument(
        "--ready", action="store_true", help="check /readyz (engine and images) instead of /healthz"
    )
    parser.add_argument("--timeout", type=seconds_above_zero, default=5.0, metavar="SECONDS")


def health_command(args: "argparse.Namespace") -> int:
    import json

    try:
        endpoint = endpoint_from(args.socket, args.url, args.token_file)
    except UsageError as exc:
        return usage_error(str(exc))
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
        if not args.ready:
            mismatch = version_mismatch(reply.body)
            if mismatch:
                print(mismatch, file=sys.stderr)
        return 0
    try:
        reason = json.loads(reply.body).get("reason") or reply.body.decode(errors="replace")
    except (ValueError, AttributeError):
        reason = reply.body.decode(errors="replace")
    state = "ready" if args.ready else "healthy"
    print(f"cloudrunner: not {state} (HTTP {reply.status}): {str(reason).strip()[:300]}",
          file=sys.stderr)  # fmt: skip
    return 1


#: what a version or commit the daemon states may hold to be repeated (one line, no escapes)
_PLAIN = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.+-_")


def _plain(value: object) -> "str | None":
    if isinstance(value, str) and 0 < len(value) <= 64 and all(c in _PLAIN for c in value):
        return value
    return None


def version_mismatch(body: bytes) -> "str | None":
    """The one line saying the daemon's version (its /healthz answer) is not this client's,
    or None when they are the same. client/internal/health/health.go says the same words."""
    import json

    from cloudrunner.version import VERSION

    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        data = {}
    daemon = _plain(data.get("version"))
    advice = "use one version of both (cloudrunner --version, cloudrunner-hook --version)"
    if daemon is None:
        return (f"cloudrunner: the daemon does not say its version (it is older than this "
                f"client, {VERSION}); {advice}")  # fmt: skip
    if daemon == VERSION:
        return None
    commit = _plain(data.get("commit")) or "unknown"
    return (f"cloudrunner: the daemon is version {daemon} (commit {commit}) and this client "
            f"{VERSION}; {advice}")  # fmt: skip
