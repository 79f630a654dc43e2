"""The intake: a payload's bytes read once into the event it names, within its bounds.

Everything here is refused before any workspace is touched: a payload over the size cap,
not JSON, not an object, one the log could not keep, one naming no event, an unknown event
or one that does not run in this profile. The document is parsed once; the plan validates
the same document against the event's model (`DecodedPayload`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypedDict

from cloudrunner.event.stage_errors import Refusal
from cloudrunner.protocol.events import MAX_PAYLOAD_DEPTH, EventSpec, event_spec, payload_problem
from cloudrunner.protocol.plan import DecodedPayload
from cloudrunner.protocol.profiles import Profile
from cloudrunner.protocol.protocol_errors import EventNotAvailable, UnknownEvent
from cloudrunner.refusals import ErrorCode


class EventIds(TypedDict):
    """The fields naming an event, on every record of it."""

    conversation_id: str
    generation_id: str
    event: str


@dataclass(frozen=True)
class Intake:
    """An event as read: its name and spec, the document, and the bytes hooks get."""

    name: str
    spec: EventSpec
    decoded: DecodedPayload

    @property
    def document(self) -> dict[str, Any]:
        return self.decoded.document

    @property
    def conversation_id(self) -> str:
        return str(self.document.get("conversation_id") or "")

    def ids(self) -> EventIds:
        return {
            "conversation_id": self.conversation_id,
            "generation_id": str(self.document.get("generation_id") or ""),
            "event": self.name,
        }


def read(payload: bytes, event: str | None, *, cap: int, profile: Profile) -> Intake:
    """The intake of `payload` (`event` from --event, else the payload's name); raises
    Refusal naming what is wrong."""
    document = _document(payload, event, cap)
    name = event or str(document.get("hook_event_name") or "")
    if not name:
        raise Refusal(
            "the payload has no hook_event_name; pass --event NAME",
            ErrorCode.EVENT_MISSING,
            event="",
            document=document,
        )
    try:
        spec = event_spec(name)
        if not profile.runs_event(spec.in_cloud):
            raise EventNotAvailable(name, str(profile), spec.not_in_cloud_reason or "")
    except UnknownEvent as exc:
        raise Refusal(exc.message, ErrorCode.UNKNOWN_EVENT, event=name, document=document) from None
    except EventNotAvailable as exc:
        raise Refusal(
            exc.message, ErrorCode.EVENT_NOT_IN_CLOUD, event=name, document=document
        ) from None
    return Intake(name, spec, DecodedPayload(document, payload))


def _document(payload: bytes, event: str | None, cap: int) -> dict[str, Any]:
    named = event or ""
    if len(payload) > cap:
        raise Refusal(
            f"the payload is {len(payload)} bytes, over the {cap}-byte cap "
            "(max_payload_bytes in the settings)",
            ErrorCode.PAYLOAD_TOO_LARGE,
            event=named,
            document={},
        )
    try:
        document: Any = json.loads(payload.decode("utf-8"))
    except RecursionError:
        raise Refusal(
            "the payload cannot be kept as sent: nested deeper than "
            f"{MAX_PAYLOAD_DEPTH} levels; send a flatter payload",
            ErrorCode.PAYLOAD_UNENCODABLE,
            event=named,
            document={},
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refusal(
            f"the payload is not a JSON document ({exc})",
            ErrorCode.PAYLOAD_NOT_JSON,
            event=named,
            document={},
        ) from None
    if not isinstance(document, dict):
        raise Refusal(
            f"the payload must be a JSON object, not {type(document).__name__}",
            ErrorCode.PAYLOAD_NOT_JSON,
            event=named,
            document={},
        )
    problem = payload_problem(document)
    if problem is not None:
        # the refused record keeps only what is safe to encode, never the payload
        raise Refusal(
            f"the payload cannot be kept as sent: {problem}",
            ErrorCode.PAYLOAD_UNENCODABLE,
            event=event or safe_text(document.get("hook_event_name")),
            document=document,
            keep_payload=False,
        )
    return dict(document)


def safe_text(value: Any) -> str:
    """An id as text any record can hold: a surrogate or a NUL is escaped, not kept."""
    if value is None or value == "":
        return ""
    if isinstance(value, dict | list):
        return f"({type(value).__name__})"  # not an id; its repr could nest without end
    text = value if isinstance(value, str) else str(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00")
