"""The daemon's front against uvicorn's internals: the installed release is one the front
was written for, and every private name it overrides, reads or calls is still there, with
the parameters it passes. This fails loudly on an upgrade that moved them, naming what."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from cloudrunner.daemon.uvicorn_front import UVICORN_WRITTEN_FOR, GuardedProtocol

REPO = Path(__file__).resolve().parents[3]
#: HttpToolsProtocol's methods GuardedProtocol overrides (and calls through super())
OVERRIDDEN = (
    "connection_made", "connection_lost", "data_received", "on_message_begin", "on_url",
    "on_header", "on_headers_complete", "on_body", "on_message_complete",
    "on_response_complete", "send_400_response",
)  # fmt: skip


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_the_installed_uvicorn_is_one_the_front_was_written_for() -> None:
    low, high = UVICORN_WRITTEN_FOR
    assert _version(low) <= _version(uvicorn.__version__) < _version(high), (
        f"uvicorn {uvicorn.__version__} is outside {low} <= v < {high}, the releases "
        "cloudrunner/daemon/uvicorn_front.py was written for: check every name this test "
        "lists against the new release, then move UVICORN_WRITTEN_FOR and the pin together"
    )


def test_the_pin_and_the_range_say_the_same() -> None:
    low, high = UVICORN_WRITTEN_FOR
    assert f'"uvicorn>={low},<{high}"' in (REPO / "pyproject.toml").read_text()


@pytest.mark.parametrize("name", OVERRIDDEN)
def test_every_overridden_callback_is_still_the_base_classs(name: str) -> None:
    assert name in GuardedProtocol.__dict__, f"GuardedProtocol no longer overrides {name}"
    base = getattr(HttpToolsProtocol, name, None)
    assert callable(base), f"HttpToolsProtocol.{name} is gone"
    ours = list(inspect.signature(GuardedProtocol.__dict__[name]).parameters)
    theirs = list(inspect.signature(base).parameters)
    assert ours == theirs, f"HttpToolsProtocol.{name}{inspect.signature(base)} changed"


def _assigned(cls: type, method: str, attribute: str) -> bool:
    source = inspect.getsource(getattr(cls, method))
    return re.search(rf"self\.{attribute}\s*(:[^=]+)?=", source) is not None


@pytest.mark.parametrize(
    ("cls", "method", "attribute"),
    [
        (HttpToolsProtocol, "__init__", "app"),  # swapped for the 431 answer
        (HttpToolsProtocol, "__init__", "cycle"),
        (HttpToolsProtocol, "connection_made", "transport"),
        (RequestResponseCycle, "__init__", "response_complete"),
        (RequestResponseCycle, "__init__", "keep_alive"),
        (uvicorn.Server, "_serve", "lifespan"),  # what the listeners do instead of _serve
        (uvicorn.Server, "startup", "servers"),
        (uvicorn.Config, "load", "loaded_app"),
        (uvicorn.Config, "load", "lifespan_class"),
    ],
)
def test_the_attributes_the_front_reads_are_still_set(
    cls: type, method: str, attribute: str
) -> None:
    assert _assigned(cls, method, attribute), (
        f"{cls.__name__}.{method} no longer sets self.{attribute}, which the front relies on"
    )


def test_the_life_cycle_the_listeners_drive_by_hand_is_still_there() -> None:
    assert "sockets" in inspect.signature(uvicorn.Server.startup).parameters
    assert inspect.iscoroutinefunction(uvicorn.Server.startup)
    assert inspect.iscoroutinefunction(uvicorn.Server.shutdown)
    assert callable(uvicorn.Config.load)
    # startup uses the lifespan the listeners set on the server, as _serve would have
    assert "self.lifespan.startup()" in inspect.getsource(uvicorn.Server.startup)
