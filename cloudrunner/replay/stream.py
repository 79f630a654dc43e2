"""Event streams: the events `cloudrunner replay` runs and the answers it expects.

Two ways to write one (README.md, "Recording and replay"):

- **recorded** (JSON lines, `run --record FILE`): one entry per answered event, with the
  payload (digested and redacted like the audit log), the answer, the commit, the hooks
  that ran (source, hooks-file sha256, outcome, image digest). Entries carry `"stream": 1`.
- **hand-written** (JSON lines or TOML): a list of events with the answer expected, kept
  next to a repository's hooks. Only the keys given in `expected` are compared.

    [[events]]
    name = "a destructive command is denied"
    event = "beforeShellExecution"
    payload = { command = "rm -rf /", cwd = "{workspace}" }
    expected = { permission = "deny" }

Every problem is reported with the file and line (JSON lines) or event number (TOML).
"""

from __future__ import annotations

import fcntl
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tomli_w

from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.events import event_spec
from cloudrunner.protocol.protocol_errors import UnknownEvent

#: the `stream` value of recorded entries
STREAM_FORMAT = 1

MatchMode = Literal["exact", "subset"]

#: keys an entry may have: hand-written ones use the first five
_HAND_KEYS = frozenset({"name", "event", "payload", "expected", "match"})
_RECORDED_KEYS = frozenset(
    {
        "stream", "time", "worker", "conversation_id", "commit", "workspace", "repo",
        "payload_text", "altered", "hooks", "sources", "image_digests", "blocked_by",
    }
)  # fmt: skip
_TOML_TOP_KEYS = frozenset({"conversation_id", "events"})
_HINTS = {"expect": "expected", "input": "payload", "hook_event_name": "event"}


class StreamError(CloudrunnerError):
    """An event stream that cannot be read or used: names the file, the spot and the fix."""


@dataclass
class StreamEvent:
    #: where it is: "FILE:LINE" (JSON lines) or "FILE: event N" (TOML)
    where: str
    event: str
    payload: dict[str, Any]
    #: the answer expected; None: run it, compare nothing
    expected: dict[str, Any] | None
    match: MatchMode
    name: str | None
    #: the entry as read, rewritten by `replay --update`
    data: dict[str, Any]

    @property
    def recorded(self) -> bool:
        return "stream" in self.data

    @property
    def commit(self) -> str | None:
        value = self.data.get("commit")
        return value if isinstance(value, str) and value else None

    @property
    def workspace(self) -> str | None:
        value = self.data.get("workspace")
        return value if isinstance(value, str) and value else None

    @property
    def payload_text(self) -> bool:
        return bool(self.data.get("payload_text", False))

    @property
    def altered(self) -> list[str]:
        value = self.data.get("altered")
        return [str(v) for v in value] if isinstance(value, list) else []

    @property
    def hooks(self) -> list[dict[str, Any]]:
        value = self.data.get("hooks")
        return [h for h in value if isinstance(h, dict)] if isinstance(value, list) else []

    @property
    def image_digests(self) -> list[str]:
        value = self.data.get("image_digests")
        return [str(v) for v in value] if isinstance(value, list) else []


@dataclass
class Stream:
    path: Path
    format: Literal["jsonl", "toml"]
    events: list[StreamEvent]
    #: the conversation of hand-written events that name none (TOML `conversation_id`)
    conversation_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def commits(self) -> list[str]:
        """The commits the events were recorded at, in order of first appearance."""
        seen: dict[str, None] = {}
        for event in self.events:
            if event.commit is not None:
                seen.setdefault(event.commit, None)
        return list(seen)


def _suggest(key: str, allowed: frozenset[str]) -> str:
    hint = _HINTS.get(key)
    if hint is not None and hint in allowed:
        return f" (did you mean {hint!r}?)"
    return ""


def parse_entry(data: object, where: str) -> StreamEvent:
    """One entry, checked: a known event, a payload object, an expected answer object."""
    if not isinstance(data, dict):
        raise StreamError(f"{where}: an event entry must be an object, not {type(data).__name__}")
    allowed = _HAND_KEYS | _RECORDED_KEYS if "stream" in data else _HAND_KEYS
    for key in data:
        if key not in allowed:
            raise StreamError(
                f"{where}: unknown key {key!r}{_suggest(key, allowed)}; an event has "
                + ", ".join(sorted(_HAND_KEYS))
            )
    if "stream" in data and data["stream"] != STREAM_FORMAT:
        raise StreamError(
            f"{where}: stream format {data['stream']!r} is not one this cloudrunner reads "
            f"({STREAM_FORMAT}); record it again or upgrade cloudrunner"
        )
    payload = data.get("payload", {})
    if not isinstance(payload, dict):
        raise StreamError(f"{where}: payload must be an object (the event's JSON input)")
    named = payload.get("hook_event_name")
    event = data.get("event", named)
    if not isinstance(event, str) or not event:
        raise StreamError(f'{where}: the entry names no event; add "event": "<event name>"')
    if named is not None and named != event:
        raise StreamError(
            f"{where}: event {event!r} but the payload's hook_event_name is {named!r}; "
            "make them agree"
        )
    try:
        event_spec(event)
    except UnknownEvent as exc:
        raise StreamError(f"{where}: {exc.message}") from None
    expected = data.get("expected")
    if expected is not None and not isinstance(expected, dict):
        raise StreamError(
            f"{where}: expected must be an object (the answer, e.g. "
            '{"permission": "deny"}), not ' + type(expected).__name__
        )
    match = data.get("match", "exact" if "stream" in data else "subset")
    if match not in ("exact", "subset"):
        raise StreamError(f"{where}: match must be 'exact' or 'subset', not {match!r}")
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        raise StreamError(f"{where}: name must be a string")
    return StreamEvent(where, event, dict(payload), expected, match, name, dict(data))


def _read_text(path: Path) -> str:
    if path.is_dir():
        raise StreamError(f"{path} is a directory, not an event stream")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StreamError(
            f"event stream {path} does not exist; record one with `cloudrunner run --record "
            f'{path}` or write one by hand (README.md, "Recording and replay")'
        ) from None
    except UnicodeDecodeError:
        raise StreamError(f"event stream {path} is not UTF-8 text") from None
    except OSError as exc:
        raise StreamError(f"cannot read event stream {path}: {exc.strerror}") from None


def _load_jsonl(path: Path, text: str) -> Stream:
    events = []
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except ValueError as exc:
            last = number == len(lines) or all(not rest.strip() for rest in lines[number:])
            cut = " (cut short: a recording interrupted mid-write?)" if last else ""
            raise StreamError(
                f"{where}: not a JSON object{cut}: {exc}; each line of a JSON lines stream is "
                "one event"
            ) from None
        events.append(parse_entry(data, where))
    return Stream(path, "jsonl", events)


def _load_toml(path: Path, text: str) -> Stream:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StreamError(f"{path}: not valid TOML: {exc}") from None
    for key in data:
        if key not in _TOML_TOP_KEYS:
            raise StreamError(
                f"{path}: unknown top-level key {key!r}; a TOML stream has "
                "conversation_id and [[events]] tables"
            )
    entries = data.get("events", [])
    if not isinstance(entries, list):
        raise StreamError(f"{path}: events must be an array of tables ([[events]])")
    conversation = data.get("conversation_id")
    if conversation is not None and not isinstance(conversation, str):
        raise StreamError(f"{path}: conversation_id must be a string")
    events = [parse_entry(entry, f"{path}: event {n}") for n, entry in enumerate(entries, start=1)]
    return Stream(path, "toml", events, conversation_id=conversation)


def load_stream(path: Path) -> Stream:
    """Read and check a stream: `.toml` is TOML, anything else JSON lines."""
    text = _read_text(path)
    stream = _load_toml(path, text) if path.suffix == ".toml" else _load_jsonl(path, text)
    if not stream.events:
        raise StreamError(
            f"event stream {path} holds no events; record some with `cloudrunner run "
            "--record` or add entries"
        )
    return stream


def append_entry(path: Path, entry: Mapping[str, Any], *, sync: bool) -> None:
    """Append one recorded entry as a line, under an exclusive lock (several `run`
    processes may record into one stream)."""
    line = (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
    except OSError as exc:
        raise StreamError(
            f"cannot record into event stream {path}: {exc.strerror}; fix the path or its "
            "permissions (--record, audit.record_path)"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # a recording cut short: keep its bytes, start a new line
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fdatasync(fd)
    except OSError as exc:
        raise StreamError(f"cannot record into event stream {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def rewrite_stream(stream: Stream) -> None:
    """Write every entry's `data` back (for `replay --update`), atomically. A TOML stream is
    written anew by tomli-w: its comments are not kept."""
    if stream.format == "toml":
        document: dict[str, Any] = {}
        if stream.conversation_id is not None:
            document["conversation_id"] = stream.conversation_id
        document["events"] = [event.data for event in stream.events]
        text = tomli_w.dumps(document)
    else:
        text = "".join(
            json.dumps(event.data, sort_keys=True, separators=(",", ":")) + "\n"
            for event in stream.events
        )
    partial = stream.path.with_name(f".{stream.path.name}.update")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, stream.path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise StreamError(f"cannot rewrite event stream {stream.path}: {exc.strerror}") from None
