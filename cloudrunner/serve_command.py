"""`cloudrunner serve`: the long-running worker behind the per-event client.

It takes every settings flag of `run`, plus where to listen. On SIGTERM (or SIGINT) it
stops accepting connections, drains the events in flight (`server.drain_timeout_s`),
closes every warm sandbox and flushes the audit log. After a SIGKILL, the next start
reaps the dead daemon's sandboxes and carries on with the persisted session state and
the same audit chain.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from cloudrunner.errors import CloudrunnerError
from cloudrunner.run_command import add_settings_flags, settings_from

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
        {"type": Path, "metavar": "FILE", "help": "the bearer token TCP clients must send"},
    ),
}


class ServeError(CloudrunnerError):
    """The daemon cannot start as configured."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def command(args: argparse.Namespace) -> int:
    from cloudrunner.daemon import Daemon
    from cloudrunner.server import Api, tcp_listener, unix_listener

    settings = settings_from(args, SERVE_FLAGS)
    tcp: tuple[str, int, str] | None = None
    if settings.server.listen:
        host, port = parse_listen(settings.server.listen)
        tcp = (host, port, read_token(settings.server.token_file))
    socket_path = settings.socket_path
    prepare_socket(socket_path)

    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    daemon = Daemon(settings)
    listeners = []
    try:
        reaped = daemon.start()
        api = Api(daemon)
        old_umask = os.umask(0o177)
        try:
            listeners.append(unix_listener(str(socket_path), api))
        finally:
            os.umask(old_umask)
        os.chmod(socket_path, 0o600)
        where = [f"unix:{socket_path}"]
        if tcp is not None:
            try:
                listener = tcp_listener(tcp[0], tcp[1], api, tcp[2])
            except OSError as exc:
                raise ServeError(f"cannot listen on {tcp[0]}:{tcp[1]}: {exc.strerror}") from None
            listeners.append(listener)
            bound_host, bound_port = listener.server_address[:2]
            where.append(f"http://{bound_host!s}:{bound_port}")
        threads = [
            threading.Thread(target=lst.serve_forever, name=f"listener-{i}", daemon=True)
            for i, lst in enumerate(listeners)
        ]
        for thread in threads:
            thread.start()
        print(
            f"cloudrunner: serving on {' and '.join(where)} (worker {daemon.worker_id}, "
            f"isolation {settings.sandbox.isolation}, {reaped} orphaned sandbox(es) reaped)",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(1.0):
            pass
        print("cloudrunner: stopping: draining events in flight", file=sys.stderr, flush=True)
        for listener in listeners:
            listener.shutdown()
        drained = daemon.drain(settings.server.drain_timeout_s)
        if not drained:
            print(
                f"cloudrunner: warning: events still running after "
                f"{settings.server.drain_timeout_s:g}s; closing their sandboxes",
                file=sys.stderr,
                flush=True,
            )
    finally:
        daemon.close_sandboxes()  # ends any run still going (a sandbox_error, recorded)
        for listener in listeners:
            listener.server_close()  # waits for the handler threads to finish
        daemon.close()  # flushes and closes the audit log
        if listeners:
            socket_path.unlink(missing_ok=True)
    print("cloudrunner: stopped", file=sys.stderr, flush=True)
    return 0
