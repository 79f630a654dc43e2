"""`cloudrunner serve`: the daemon.

The life cycle and the parts an event meets (`core`, over `admission`, `registry` and
`threads`' worker pool) and the front door (`listeners`: the sockets, served by
`thread_front` on the unix socket and `uvicorn_front` on TCP; `connections`: deadlines, caps
and connection bounds; `app`: the ASGI app; `models` and `openapi`: the API's bodies and
its document; `metrics`; `memory`) live here side by side. Its names are exported lazily:
importing one of its modules does not import the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cloudrunner import lazy_export

if TYPE_CHECKING:
    from cloudrunner.daemon.core import Daemon
    from cloudrunner.daemon.listeners import (
        Front,
        new_loop,
        raise_open_file_limit,
        tcp_socket,
        unix_socket,
    )
    from cloudrunner.daemon.request_errors import DaemonError

#: each name is imported from its module on first use (`cloudrunner.lazy_export`)
_WHERE = {
    "Daemon": "cloudrunner.daemon.core",
    "Front": "cloudrunner.daemon.listeners",
    "new_loop": "cloudrunner.daemon.listeners",
    "raise_open_file_limit": "cloudrunner.daemon.listeners",
    "tcp_socket": "cloudrunner.daemon.listeners",
    "unix_socket": "cloudrunner.daemon.listeners",
    "DaemonError": "cloudrunner.daemon.request_errors",
}


def __getattr__(name: str) -> Any:
    return lazy_export(globals(), _WHERE, name)


__all__ = [
    "Daemon",
    "DaemonError",
    "Front",
    "new_loop",
    "raise_open_file_limit",
    "tcp_socket",
    "unix_socket",
]
