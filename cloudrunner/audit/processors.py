"""The structlog processor pipeline that turns the runner's fields into one audit line.

    time -> identity -> clean (JSON values, payload digests, redaction, size caps) -> chain
         -> render

Each step is a small structlog processor; the clean step walks the fields once and does
all four of its jobs on the way. Everything up to the chain is pure and exposed
as `record_processors`, so a test can run it with `structlog.testing.LogCapture` at the end
and assert on the records as dicts; the writer appends `chain_and_render` (the work of
`chain_processor` and `render_line` with one serialisation of the record) and runs the
whole pipeline under its file lock (the chain needs the tail it just read).

Payload text is digested *before* redaction on purpose: the digest must be of the text the
agent really handled, or it could never be matched against a transcript later; a digest
reveals nothing of a secret inside a prompt or a file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import Enum
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:  # annotations only: readers of the log need not import structlog
    from structlog.typing import EventDict, Processor, WrappedLogger

from cloudrunner.audit import bounds
from cloudrunner.audit.chain import canonical_json
from cloudrunner.audit.digest import PAYLOAD_TEXT_KEYS, digest_value
from cloudrunner.audit.redaction import blank, redact, secret_flag_values, secret_keys

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
        return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    return moment.isoformat(timespec="microseconds")


def add_time(clock: Clock = utc_now) -> Processor:
    """Stamp `time` (UTC, ISO 8601, microseconds) unless the runner gave one."""

    def processor(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        if "time" not in event_dict:
            # ours, and nothing to redact: the clean step takes it as it is (a new string
            # on every record would only push remembered redactions out of their cache)
            event_dict["time"] = Cleaned(format_time(clock()))
        return event_dict

    return processor


def add_identity(worker: str, pid: int | None = None) -> Processor:
    """Who wrote the record: the worker id (unless the runner gave one) and the process."""
    writer_pid = os.getpid() if pid is None else pid

    def processor(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        if worker:
            event_dict.setdefault("worker", worker)
        event_dict["pid"] = writer_pid
        return event_dict

    return processor


@dataclasses.dataclass(frozen=True, slots=True)
class Cleaned:
    """A field value already as a record stores it (`AuditWriter.cleaned`): the pipeline
    takes it as it is. For what stays the same across many records (a sandbox's
    attestation is a few kilobytes on every hook record), so it is walked once."""

    value: Any


class _Unfit(Exception):
    """A value JSON cannot hold; `path` grows as the error unwinds, so the hot path never
    builds field paths it would only need for the message."""

    def __init__(self, error: type[Exception], problem: str) -> None:
        super().__init__(problem)
        self.error, self.problem, self.path = error, problem, ""


def json_value(value: Any, where: str = "record") -> Any:
    """`value` as plain JSON data (a deep copy), or a TypeError/ValueError naming where."""
    try:
        return _plain(value)
    except _Unfit as exc:
        raise exc.error(f"audit field {where}{exc.path} {exc.problem}") from None


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value  # the common case first: most fields are plain strings and numbers
    if kind is Cleaned:
        return value.value
    if kind is dict or isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _Unfit(TypeError, f"has a non-string key {key!r}")
            try:
                out[key] = _plain(item)
            except _Unfit as exc:
                exc.path = f".{key}{exc.path}"
                raise
        return out
    if kind is list or kind is tuple or isinstance(value, list | tuple):
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_plain(item))
            except _Unfit as exc:
                exc.path = f"[{index}]{exc.path}"
                raise
        return items
    if isinstance(value, Enum):
        return _plain(value.value)
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Unfit(ValueError, f"is {value}, which JSON cannot hold")
        return value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, set | frozenset):
        return sorted((_plain(item) for item in value), key=canonical_json)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return _plain(model_dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    raise _Unfit(TypeError, f"holds a {type(value).__name__}, which is not JSON data")


def _digested(value: Any) -> dict[str, Any]:
    """A payload-text value (at a PAYLOAD_TEXT_KEYS key) as its digest (sha256 and length:
    nothing to redact)."""
    digest: dict[str, Any] = dict(digest_value(_plain(value)))
    return digest


def _clean(value: Any, digest: bool, cap: int | None = None) -> Any:
    """`value` as the record stores it, in one walk: plain JSON data (as `json_value`),
    payload text digested (when `digest`), secrets redacted (every string, and the values
    of keys named like secrets), strings longer than `cap` cut with their digest. The same
    result as separate walks one after the other, which were most of what writing a record
    cost."""
    kind = type(value)
    if kind is str:
        return redact(value) if cap is None else bounds.bounded(value, cap)
    if kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        secret = secret_keys(value)
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _Unfit(TypeError, f"has a non-string key {key!r}")
            try:
                if digest and key in PAYLOAD_TEXT_KEYS:
                    out[key] = _digested(item)
                elif key in secret:
                    out[key] = blank(_plain(item))
                else:
                    out[key] = _clean(item, digest, cap)
            except _Unfit as exc:
                exc.path = f".{key}{exc.path}"
                raise
        return out
    if kind is list:
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_clean(item, digest, cap))
            except _Unfit as exc:
                exc.path = f"[{index}]{exc.path}"
                raise
        # an argv list: the value after a secret's flag (["--token", "x"]), once items are
        # plain strings
        for index in secret_flag_values(items):
            items[index] = blank(items[index])
        return items
    plain = _plain(value)  # a float (checked), or a tuple, mapping, enum, path, model, ...
    return plain if type(plain) is float else _clean(plain, digest, cap)


def clean_record(
    fields: Mapping[str, Any], *, include_payload_text: bool, bounded: bool = False
) -> dict[str, Any]:
    """`fields` as a record stores them: plain JSON values only, so a written line
    re-serialises to the bytes that were hashed; payload text (PAYLOAD_TEXT_KEYS, at any
    depth) replaced by sha256 and length unless `include_payload_text`; every string value,
    at any depth, through `redact`, and the values of keys named like secrets (at any depth
    below the top: top-level keys are the runner's own names) blanked. With `bounded`, the
    strings of every field but the payload and the excerpts are cut (`bounds.cap_for`)."""
    digest = not include_payload_text
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if type(value) is Cleaned:
            out[key] = value.value
            continue
        try:
            out[key] = (
                _digested(value)
                if digest and key in PAYLOAD_TEXT_KEYS
                else _clean(value, digest, bounds.cap_for(key) if bounded else None)
            )
        except _Unfit as exc:
            raise exc.error(f"audit field {key}{exc.path} {exc.problem}") from None
    return out


def clean_value(key: str, value: Any, *, include_payload_text: bool) -> Cleaned:
    """`value` cleaned once, as `clean_record(..., bounded=True)` would store it under the
    top-level `key`, for records to take as it is."""
    return Cleaned(clean_record({key: value}, include_payload_text=include_payload_text,
                                bounded=True)[key])  # fmt: skip


def clean_values(include_payload_text: bool) -> Processor:
    """`clean_record` as a step of the pipeline, record size bounded."""

    def processor(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        return clean_record(event_dict, include_payload_text=include_payload_text, bounded=True)

    return processor


def record_processors(
    *, worker: str = "", include_payload_text: bool = False, clock: Clock = utc_now
) -> list[Processor]:
    """The pure part of the pipeline, before the chain."""
    return [add_time(clock), add_identity(worker), clean_values(include_payload_text)]


@dataclasses.dataclass
class ChainHead:
    """The last record of the chain, as the writer last read or wrote it."""

    seq: int
    hash: str


def chain_processor(head: ChainHead) -> Processor:
    """Link the record to `head`: next `seq`, `prev_hash`, and its own `hash`."""

    def processor(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        event_dict.pop("hash", None)
        event_dict["seq"] = head.seq + 1
        event_dict["prev_hash"] = head.hash
        body = canonical_json(event_dict)
        event_dict["hash"] = hashlib.sha256(body.encode("ascii")).hexdigest()
        return event_dict

    return processor


#: orjson's options for `record_json`: keys sorted, and anything it would encode where the
#: standard library would not (a subclass, a dataclass, a date) raised instead, so that goes
#: to `canonical_json` too
_ORJSON = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
#: a number orjson may spell otherwise than `json` (which writes `1e-05` for floats under
#: 1e-4 and every exponent with its sign); in canonical JSON a number follows `:`, `,` or
#: `[`. A string that looks so (`"a:1e"`) only sends the record the slower way.
_UNSURE_NUMBER = re.compile(rb"[:,\[]-?(?:0\.0000|[0-9][0-9.]*e)")


def record_json(value: dict[str, Any]) -> str:
    """`canonical_json(value)` for a cleaned record (plain JSON values, finite floats),
    made by orjson when its text is provably the same: ASCII only (json escapes the rest,
    DEL included) and no number that `json` spells differently; else by `canonical_json`.
    Writing a record serialises it twice, and this was most of what that cost."""
    try:
        data = orjson.dumps(value, option=_ORJSON)
    except TypeError:  # an integer over 64 bits, a lone surrogate, a non-str key, ...
        return canonical_json(value)
    if not data.isascii() or b"\x7f" in data or _UNSURE_NUMBER.search(data):
        return canonical_json(value)
    return data.decode("ascii")


def _joined(*objects: str) -> str:
    """Canonical JSON objects whose keys sort in the order given, as one object."""
    return "{" + ",".join(text[1:-1] for text in objects if text != "{}") + "}"


def chain_and_render(head: ChainHead) -> Processor:
    """`chain_processor` and `render_line` in one step that serialises the record once:
    the keys before and after `hash` are encoded apart, so the hashed body (without `hash`)
    and the line (with it, in its sorted place) are both joined from the same two texts."""

    def processor(
        _logger: WrappedLogger, _method: str, event_dict: EventDict
    ) -> tuple[tuple[bytes, EventDict], dict[str, Any]]:
        event_dict.pop("hash", None)
        event_dict["seq"] = head.seq + 1
        event_dict["prev_hash"] = head.hash
        before = record_json({k: v for k, v in event_dict.items() if k < "hash"})
        after = record_json({k: v for k, v in event_dict.items() if k > "hash"})
        digest = hashlib.sha256(_joined(before, after).encode("ascii")).hexdigest()
        event_dict["hash"] = digest
        line = _joined(before, '{"hash":"' + digest + '"}', after) + "\n"
        return (line.encode("ascii"), event_dict), {}

    return processor


def render_line(
    _logger: WrappedLogger, _method: str, event_dict: EventDict
) -> tuple[tuple[bytes, EventDict], dict[str, Any]]:
    """The record as one canonical JSON line, handed to the sink with the record itself."""
    line = (canonical_json(event_dict) + "\n").encode("ascii")
    return (line, event_dict), {}
