"""The spans of an event, recorded by small calls on the event path.

When tracing is off (no sink installed, the default) every helper returns the one shared
no-op object `OFF` before doing anything else: no span, no clock read, no attribute
computed, not even an OpenTelemetry import. When it is on, each event is one trace:

- `front`: the HTTP request (the trace's root, or the child of the client's `traceparent`),
  with the route, the event name and the conversation and generation ids;
- `span`: a stage inside it (admission, each audit sync, the merge);
- `hook`: one hook's run (source, hook id, the sha256 of its command, the sandbox, the exit
  code, the status and the sandbox cause);
- `waited`: how long the event waited for something (a free slot), on the front span.

On the event path a span is only recorded (a name, two clock readings, a few attributes, in
a small tree); when the front span ends, the tree is handed to the sink (`provider.Tracing`),
whose own thread makes the OpenTelemetry SDK's spans of it, with these times and parents,
and queues them for export. So an event never waits for the SDK, let alone the collector.

A span never holds a payload, a hook's command text or output, an error's message or a
secret: only names, ids, digests, codes and counts. An error marks a span with its type and
error code, never its message (which may quote the payload)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, ParamSpec, Protocol, TypeVar

from cloudrunner.telemetry.traceparent import Parent
from cloudrunner.telemetry.traceparent import parse as parse_traceparent

Value = str | int | float | bool
P = ParamSpec("P")
T = TypeVar("T")


class Span(Protocol):
    def set_attribute(self, key: str, value: Value) -> None: ...


class _Off:
    """The span of an event that is not traced: enters, takes attributes, does nothing."""

    __slots__ = ()

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set_attribute(self, key: str, value: Value) -> None:
        return None


OFF = _Off()


class Recorded:
    """One span as the event path recorded it; `children` in the order they started.
    A context manager: entered, it is the current span (of this thread's context) and its
    clock starts; left, its clock stops (and a root goes to the sink)."""

    __slots__ = (
        "_token",
        "attributes",
        "children",
        "end_ns",
        "error",
        "name",
        "parent",
        "root",
        "start_ns",
    )  # fmt: skip

    def __init__(
        self, name: str, attributes: dict[str, Value], root: Recorded | None = None
    ) -> None:
        self.name = name
        self.attributes = attributes
        self.children: list[Recorded] = []
        self.root = root if root is not None else self
        #: the remote parent (a root's, from traceparent), else None
        self.parent: Parent | None = None
        self.start_ns = 0
        self.end_ns = 0
        #: (error type, error code or "") when the block raised
        self.error: tuple[str, str] | None = None

    def set_attribute(self, key: str, value: Value) -> None:
        self.attributes[key] = value

    def __enter__(self) -> Recorded:
        self._token = _current.set(self)
        self.start_ns = time.time_ns()
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        self.end_ns = time.time_ns()
        _current.reset(self._token)
        if exc is not None:
            code = getattr(exc, "code", None)
            self.error = (type(exc).__name__, "" if code is None else str(code))
        if self.root is self and _sink is not None:
            _sink(self)


_sink: Callable[[Recorded], None] | None = None
_current: ContextVar[Recorded | None] = ContextVar("cloudrunner_span", default=None)


def install(sink: Callable[[Recorded], None] | None) -> None:
    """Record events' spans and give each finished trace to `sink`; None: stop tracing."""
    global _sink
    _sink = sink


def enabled() -> bool:
    return _sink is not None


def front(traceparent: str | None, route: str) -> AbstractContextManager[Span]:
    """The span of one request, for any HTTP front: `traceparent` is the request's header
    (None when absent), `route` the operation's name (`event`, ...). A malformed
    traceparent is ignored (a new trace starts) and the span says why."""
    if _sink is None:
        return OFF
    root = Recorded("cloudrunner.front", {"http.route": route})
    parent = parse_traceparent(traceparent)
    if isinstance(parent, Parent):
        root.parent = parent
    elif parent is not None:
        root.attributes["cloudrunner.traceparent.rejected"] = parent
    return root


def _child(name: str, attributes: dict[str, Value]) -> AbstractContextManager[Span]:
    parent = _current.get()
    if parent is None:  # no front span (not an event the daemon took): nothing to say
        return OFF
    child = Recorded(name, attributes, parent.root)
    parent.children.append(child)
    return child


def span(name: str, attributes: Mapping[str, Value] | None = None) -> AbstractContextManager[Span]:
    """A child span of the current one named `cloudrunner.<name>`."""
    if _sink is None:
        return OFF
    return _child(f"cloudrunner.{name}", dict(attributes or {}))


def hook(source: str, hook_id: str, command: str) -> AbstractContextManager[Span]:
    """One hook's span; its command is kept as a sha256 digest only."""
    if _sink is None:
        return OFF
    digest = hashlib.sha256(command.encode("utf-8", "surrogatepass")).hexdigest()
    return _child(
        "cloudrunner.hook",
        {
            "cloudrunner.hook.source": source,
            "cloudrunner.hook.id": hook_id,
            "cloudrunner.hook.command_sha256": digest,
        },
    )


#: the attested sandbox facts a hook span carries (never environment or mounts)
_SANDBOX_KEYS = ("isolation", "runtime", "image", "network")


def hook_ran(
    span: Span,
    status: str,
    exit_code: int | None,
    cause: str | None,
    attestation: Mapping[str, Any],
) -> None:
    """What became of a hook: its status, exit code, sandbox cause and sandbox."""
    if span is OFF:
        return
    span.set_attribute("cloudrunner.hook.status", status)
    if exit_code is not None:
        span.set_attribute("cloudrunner.hook.exit_code", exit_code)
    if cause:
        span.set_attribute("cloudrunner.hook.cause", cause)
    for key in _SANDBOX_KEYS:
        value = attestation.get(key)
        if isinstance(value, str) and value:
            span.set_attribute(f"cloudrunner.sandbox.{key}", value)


def waited(key: str, since: float) -> None:
    """Say on the event's front span how long something waited, in ms, from `since`
    (a `time.monotonic()` reading)."""
    if _sink is None:
        return
    current = _current.get()
    if current is not None:
        current.root.attributes[key] = round((time.monotonic() - since) * 1000, 3)


#: the longest id a span keeps (an id is far shorter; a longer value is cut)
ID_MAX = 256


def event_ids(event: str, document: Mapping[str, Any]) -> None:
    """Name the event and the payload's conversation and generation ids (nothing else of
    it) on the event's front span."""
    if _sink is None:
        return
    current = _current.get()
    if current is None:
        return
    attributes = current.root.attributes
    attributes["cloudrunner.event"] = event[:ID_MAX]
    for key in ("conversation_id", "generation_id"):
        value = document.get(key)
        if isinstance(value, str) and value:
            attributes[f"cloudrunner.{key}"] = value[:ID_MAX]


def carry(func: Callable[P, T]) -> Callable[P, T]:
    """`func`, to be run on another thread inside the caller's current span."""
    if _sink is None:
        return func
    captured = _current.get()

    def inside(*args: P.args, **kwargs: P.kwargs) -> T:
        token = _current.set(captured)
        try:
            return func(*args, **kwargs)
        finally:
            _current.reset(token)

    return inside
