"""`cloudrunner serve`: the long-running worker behind the per-event client.

It takes every settings flag of `run`, plus where to listen. On SIGTERM (or SIGINT) it
stops accepting connections, drains the events in flight (`server.drain_timeout_s`),
closes every warm sandbox and flushes the audit log. After a SIGKILL, the next start
reaps the dead daemon's sandboxes and carries on with the persisted session state and
the same audit chain.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

from cloudrunner.client import bearer_token_ok
from cloudrunner.commands.run import add_settings_flags, settings_from
from cloudrunner.errors import CloudrunnerError
from cloudrunner.settings import Settings

#: flag -> (settings key, argparse keyword arguments), on top of run's settings flags
SERVE_FLAGS: dict[str, tuple[str, dict[str, object]]] = {
    "--socket": (
        "server.socket",
        {
            "type": Path,
            "metavar": "PATH",
            "help": "unix socket (default <state-dir>/cloudrunner.sock)",
        },
    ),
    "--listen": (
        "server.listen",
        {"metavar": "HOST:PORT", "help": "also serve TCP here; needs --token-file"},
    ),
    "--token-file": (
        "server.token_file",
        {
            "type": Path,
            "metavar": "FILE",
            "help": "the bearer token TCP clients must send (16 or more visible ASCII characters)",
        },
    ),
}


class ServeError(CloudrunnerError):
    """The daemon cannot start as configured."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "serve",
        help="the long-running worker: HTTP API on a unix socket (and TCP), warm sandboxes",
    )
    add_settings_flags(parser, SERVE_FLAGS)
    parser.set_defaults(handler=command)


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ServeError(
            f"--listen {text!r} is not HOST:PORT (for example 127.0.0.1:8765, or 0.0.0.0:8765 "
            "to accept other hosts)"
        )
    return host, int(port_text)


def read_token(path: Path | None) -> str:
    if path is None:
        raise ServeError(
            "--listen needs --token-file FILE: TCP clients must send its text as a bearer token"
        )
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ServeError(f"cannot read the token file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ServeError(f"the token file {path} is not text") from None
    if not bearer_token_ok(token):
        raise ServeError(
            f"the token in {path} holds a character a bearer token cannot carry (a space, a "
            "control character or non-ASCII); write a long random one (e.g. "
            "`openssl rand -hex 32 > FILE`)"
        )
    if len(token) < 16:
        raise ServeError(
            f"the token in {path} is {'empty' if not token else 'shorter than 16 characters'}; "
            "write a long random one (e.g. `openssl rand -hex 32 > FILE`)"
        )
    return token


def prepare_socket(path: Path) -> None:
    """Make room for the unix socket: refuse when a live daemon answers on it, remove a
    stale one that a killed daemon left behind."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise ServeError(f"cannot create {path.parent}: {exc.strerror}") from None
    if not os.path.lexists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        path.unlink(missing_ok=True)  # stale: nobody listens
        return
    except OSError as exc:
        raise ServeError(f"{path} exists and is not a usable socket ({exc}); remove it") from None
    finally:
        probe.close()
    raise ServeError(
        f"another daemon already listens on {path}; stop it, or give this one --socket PATH"
    )


def _say_workspace(settings: Settings) -> None:
    """Which tree the hooks act on: the agent must be pointed at that same directory
    (an event naming another one is refused as workspace-mismatch)."""
    cfg = settings.workspace
    if cfg.path is not None:
        how = f"cloned from {cfg.repo} into it once it is writable" if cfg.repo else "adopted"
        print(f"cloudrunner: workspace {cfg.path} ({how}); point the agent at it",
              file=sys.stderr, flush=True)  # fmt: skip
    elif cfg.repo:
        print(
            f"cloudrunner: warning: --repo without --workspace clones into {settings.clone_dir}, "
            "a tree no agent edits: events naming the agent's workspace are refused "
            "(workspace-mismatch); give --workspace DIR, the agent's workspace, to clone there",
            file=sys.stderr,
            flush=True,
        )


def command(args: argparse.Namespace) -> int:
    settings = settings_from(args, SERVE_FLAGS)
    from cloudrunner.vm import self_call_problem

    problem = self_call_problem(settings)
    if problem is not None:
        raise ServeError(problem)
    tcp: tuple[str, int, str] | None = None
    if settings.server.listen:
        host, port = parse_listen(settings.server.listen)
        tcp = (host, port, read_token(settings.server.token_file))
    socket_path = settings.socket_path
    prepare_socket(socket_path)
    from cloudrunner.daemon import new_loop

    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(_serve(settings, socket_path, tcp))


async def _serve(settings: Settings, socket_path: Path, tcp: tuple[str, int, str] | None) -> int:
    from cloudrunner.daemon import Daemon

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    daemon = Daemon(settings)
    # reap first: a killed daemon's sandboxes are reaped (and recorded) before they go
    reaped = daemon.start()
    from cloudrunner.daemon import (
        Front,
        raise_open_file_limit,
        tcp_socket,
        unix_socket,
    )

    open_files = raise_open_file_limit()
    front = Front(daemon)
    bound = False
    try:
        try:
            sock = unix_socket(socket_path)
        except OSError as exc:
            raise ServeError(f"cannot listen on {socket_path}: {exc.strerror}") from None
        bound = True
        await front.listen(sock)
        if tcp is not None:
            try:
                tcp_sock = tcp_socket(tcp[0], tcp[1])
            except OSError as exc:
                raise ServeError(f"cannot listen on {tcp[0]}:{tcp[1]}: {exc.strerror}") from None
            await front.listen(tcp_sock, tcp[2])
        where = [listener.address for listener in front.listeners]
        print(
            f"cloudrunner: serving on {' and '.join(where)} (worker {daemon.worker_id}, "
            f"isolation {settings.sandbox.isolation}, {reaped} orphaned sandbox(es) reaped, "
            f"open-file limit {open_files})",
            file=sys.stderr,
            flush=True,
        )
        _say_workspace(settings)
        caps = settings.server.max_connections * len(where) + (
            settings.server.max_unauthenticated if tcp else 0
        )
        if open_files < caps + 256:
            print(
                f"cloudrunner: warning: the open-file limit ({open_files}) is below the "
                f"connection caps ({caps}, server.max_connections and max_unauthenticated); "
                "connections past it are refused by the kernel: raise `ulimit -Hn` or lower "
                "the caps",
                file=sys.stderr,
                flush=True,
            )
        await stop.wait()
        print("cloudrunner: stopping: draining events in flight", file=sys.stderr, flush=True)
        drained = await front.drain(settings.server.drain_timeout_s)
        if not drained:
            print(
                f"cloudrunner: warning: events still running after "
                f"{settings.server.drain_timeout_s:g}s; closing their sandboxes",
                file=sys.stderr,
                flush=True,
            )
    finally:
        daemon.close_sandboxes()  # ends any run still going (a sandbox_error, recorded)
        await front.close()  # closes every connection, waits for the event threads
        daemon.close()  # flushes and closes the audit log
        if bound:
            socket_path.unlink(missing_ok=True)
    print("cloudrunner: stopped", file=sys.stderr, flush=True)
    return 0
