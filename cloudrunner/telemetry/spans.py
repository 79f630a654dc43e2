"""The spans of an event, made by small calls on the event path.

When tracing is off (no tracer installed, the default) every helper returns the one shared
no-op object `OFF` before doing anything else: no span object, no context, no attribute
computed, not even an OpenTelemetry import. When it is on, each event is one trace:

- `front`: the HTTP request (the trace's root, or the child of the client's `traceparent`),
  with the route, the event name and the conversation and generation ids;
- `span`: a stage inside it (the slot wait, admission, preparation, each audit sync, the
  merge);
- `hook`: one hook's run (source, hook id, the sha256 of its command, the sandbox, the exit
  code, the status and the sandbox cause).

A span never holds a payload, a hook's command text or output, an error's message or a
secret: only names, ids, digests, codes and counts. An error marks a span with its type and
error code, never its message (which may quote the payload)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from cloudrunner.telemetry.traceparent import Parent
from cloudrunner.telemetry.traceparent import parse as parse_traceparent

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

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
_tracer: Tracer | None = None


def install(tracer: Tracer | None) -> None:
    """Trace events with `tracer` from now on; None: stop tracing."""
    global _tracer
    _tracer = tracer


def enabled() -> bool:
    return _tracer is not None


def front(traceparent: str | None, route: str) -> AbstractContextManager[Span]:
    """The span of one request, for any HTTP front: `traceparent` is the request's header
    (None when absent), `route` the operation's name (`event`, ...). A malformed
    traceparent is ignored (a new trace starts) and the span says why."""
    if _tracer is None:
        return OFF
    return _front(_tracer, traceparent, route)


@contextmanager
def _front(tracer: Tracer, traceparent: str | None, route: str) -> Iterator[Span]:
    from opentelemetry import trace

    parent = parse_traceparent(traceparent)
    context = None
    if isinstance(parent, Parent):
        remote = trace.SpanContext(
            parent.trace_id,
            parent.span_id,
            is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED if parent.sampled else 0),
        )
        context = trace.set_span_in_context(trace.NonRecordingSpan(remote))
    with tracer.start_as_current_span(
        "cloudrunner.front",
        context=context,
        kind=trace.SpanKind.SERVER,
        attributes={"http.route": route},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        if isinstance(parent, str):
            span.set_attribute("cloudrunner.traceparent.rejected", parent)
        try:
            yield span
        except BaseException as exc:
            _failed(span, exc)
            raise


def span(name: str, attributes: Mapping[str, Value] | None = None) -> AbstractContextManager[Span]:
    """A child span of the current one named `cloudrunner.<name>`."""
    if _tracer is None:
        return OFF
    return _Live(_tracer, f"cloudrunner.{name}", attributes)


def hook(source: str, hook_id: str, command: str) -> AbstractContextManager[Span]:
    """One hook's span; its command is kept as a sha256 digest only."""
    if _tracer is None:
        return OFF
    return _Live(
        _tracer,
        "cloudrunner.hook",
        {
            "cloudrunner.hook.source": source,
            "cloudrunner.hook.id": hook_id,
            "cloudrunner.hook.command_sha256": hashlib.sha256(
                command.encode("utf-8", "surrogatepass")
            ).hexdigest(),
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


#: the longest id a span keeps (an id is far shorter; a longer value is cut)
ID_MAX = 256


def event_ids(event: str, document: Mapping[str, Any]) -> None:
    """Name the event and the payload's conversation and generation ids (nothing else of
    it) on the current span: the front's, on the daemon."""
    if _tracer is None:
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    current.set_attribute("cloudrunner.event", event[:ID_MAX])
    for key in ("conversation_id", "generation_id"):
        value = document.get(key)
        if isinstance(value, str) and value:
            current.set_attribute(f"cloudrunner.{key}", value[:ID_MAX])


def carry(func: Callable[P, T]) -> Callable[P, T]:
    """`func`, to be run on another thread inside the caller's current span."""
    if _tracer is None:
        return func
    from opentelemetry import context

    captured = context.get_current()

    def inside(*args: P.args, **kwargs: P.kwargs) -> T:
        token = context.attach(captured)
        try:
            return func(*args, **kwargs)
        finally:
            context.detach(token)

    return inside


class _Live:
    """A started span, current while the block runs; an error marks it by type and code."""

    __slots__ = ("_manager", "_span")

    def __init__(self, tracer: Tracer, name: str, attributes: Mapping[str, Value] | None) -> None:
        self._manager = tracer.start_as_current_span(
            name, attributes=attributes, record_exception=False, set_status_on_exception=False
        )

    def __enter__(self) -> Span:
        self._span: Span = self._manager.__enter__()
        return self._span

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is not None:
            _failed(self._span, exc)
        self._manager.__exit__(kind, exc, tb)


def _failed(span: Any, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", type(exc).__name__)
    code = getattr(exc, "code", None)
    if code is not None:
        span.set_attribute("cloudrunner.error_code", str(code))
    span.set_status(Status(StatusCode.ERROR))
