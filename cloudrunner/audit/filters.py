"""Which records an operator asks for: the filters `audit query`, `tail`, `stats` and
`export` share, and the one-word label of an event's answer.

Every filter may be given more than once (a record matches any of its values); different
filters must all match. Because records are canonical JSON (sorted keys, no whitespace,
ASCII), a wanted value has one exact spelling in the line, so `accept` can reject most
lines by a byte search before they are parsed; `matches` then decides on the parsed record.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from cloudrunner.audit.processors import format_time
from cloudrunner.audit.records import AnyRecord, RecordKind, view
from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.event_names import EVENT_NAMES, STOP
from cloudrunner.protocol.profiles import SOURCE_NAMES

#: decision labels, in the order `audit stats` prints them
DECISION_LABELS = ("deny", "ask", "block", "followup", "allow", "none")

_RELATIVE = re.compile(r"([0-9]+)([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def decision_label(answer: object) -> str | None:
    """One word for an event's merged answer: its `permission` (allow, deny, ask); `block`
    for `continue: false`; `followup` for a follow-up message; else `allow` when it says
    `continue: true` and `none` when it decides nothing. None: not an answer."""
    if not isinstance(answer, Mapping):
        return None
    permission = answer.get("permission")
    if isinstance(permission, str):
        return permission
    if answer.get("continue") is False:
        return "block"
    if answer.get("followup_message"):
        return "followup"
    if answer.get("continue") is True:
        return "allow"
    return "none"


def answer_of(record: AnyRecord) -> object:
    """The answer a record holds: an event's `decision`, or the `answer` a client gave
    without a daemon (a `fallback` record)."""
    fallback = view(record, RecordKind.FALLBACK)
    if fallback is not None:
        return fallback.get("answer")
    return record.get("decision")


def parse_time(text: str, *, now: datetime | None = None, flag: str = "--since") -> str:
    """A time bound in the records' own format (UTC, microseconds, `Z`), from ISO 8601
    (`2025-01-02`, `2025-01-02T03:04:05Z`, with an offset; no zone = UTC) or an age
    (`30s`, `15m`, `2h`, `7d`, `1w`: that long before now)."""
    value = text.strip()
    relative = _RELATIVE.fullmatch(value)
    if relative is not None:
        amount, unit = int(relative.group(1)), relative.group(2)
        moment = (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
        return format_time(moment)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise CloudrunnerError(
            f"{flag} {text!r} is not a time: give ISO 8601 (2025-01-02, "
            "2025-01-02T03:04:05Z) or an age such as 30m, 2h, 7d"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return format_time(moment)


#: the record fields a filter matches by exact value (every one a field of `AnyRecord`)
_ExactKey = Literal["kind", "session", "conversation_id", "event", "source", "outcome"]


def _spelled(key: str, value: Any) -> bytes:
    return f'"{key}":{json.dumps(value, ensure_ascii=True)}'.encode("ascii")


@dataclass(frozen=True)
class RecordFilter:
    kinds: tuple[str, ...] = ()
    sessions: tuple[str, ...] = ()
    conversations: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    #: substrings of the hook command
    commands: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    #: inclusive bounds, in the records' time format
    since: str | None = None
    until: str | None = None

    @property
    def empty(self) -> bool:
        return self == RecordFilter()

    def _exact(self) -> tuple[tuple[_ExactKey, tuple[str, ...]], ...]:
        """The record keys matched by exact value, with the values wanted (empty: any)."""
        return (
            ("kind", self.kinds),
            ("session", self.sessions),
            ("conversation_id", self.conversations),
            ("event", self.events),
            ("source", self.sources),
            ("outcome", self.outcomes),
        )

    def matches(self, record: AnyRecord) -> bool:
        for key, wanted in self._exact():
            if wanted and record.get(key) not in wanted:
                return False
        if self.commands:
            command = record.get("command")
            if not isinstance(command, str) or not any(c in command for c in self.commands):
                return False
        if self.decisions and decision_label(answer_of(record)) not in self.decisions:
            return False
        if self.since is not None or self.until is not None:
            moment = record.get("time")
            if not isinstance(moment, str):
                return False
            if self.since is not None and moment < self.since:
                return False
            if self.until is not None and moment > self.until:
                return False
        return True

    def accept(self) -> Callable[[bytes], bool] | None:
        """A byte-level pre-filter: False only for lines that cannot match."""
        groups: list[tuple[bytes, ...]] = []
        for key, wanted in self._exact():
            if wanted:
                groups.append(tuple(_spelled(key, value) for value in wanted))
        if self.commands:
            groups.append(tuple(json.dumps(c)[1:-1].encode("ascii") for c in self.commands))
        if self.decisions and not {"allow", "none"} & set(self.decisions):
            spelled = {
                "deny": b'"permission":"deny"',
                "ask": b'"permission":"ask"',
                "block": b'"continue":false',
                "followup": b'"followup_message"',
            }
            groups.append(tuple(spelled[d] for d in self.decisions if d in spelled))
        if not groups:
            return None

        def accept(raw: bytes) -> bool:
            # plain loops: this runs once per line of the log
            for group in groups:
                for spelled in group:
                    if spelled in raw:
                        break
                else:
                    return False
            return True

        return accept


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("filters (each may be repeated; all given must match)")
    group.add_argument(
        "--kind",
        action="append",
        default=[],
        metavar="KIND",
        help=", ".join(kind.value for kind in RecordKind),
    )
    group.add_argument(
        "--session",
        action="append",
        default=[],
        metavar="ID",
        help="the record's session: its conversation_id, or run-PID for `cloudrunner run`",
    )
    group.add_argument(
        "--conversation", action="append", default=[], metavar="ID", help="conversation_id"
    )
    group.add_argument(
        "--event", action="append", default=[], metavar="NAME", help=f"an event name, e.g. {STOP}"
    )
    group.add_argument("--source", action="append", default=[], choices=list(SOURCE_NAMES))
    group.add_argument(
        "--command",
        action="append",
        default=[],
        metavar="TEXT",
        help="a substring of the hook command",
    )
    group.add_argument(
        "--outcome",
        action="append",
        default=[],
        metavar="OUTCOME",
        help="ok, blocked, error, timeout, invalid_output, output_overflow, "
        "oom, sandbox_error, skipped",
    )
    group.add_argument(
        "--decision",
        action="append",
        default=[],
        choices=DECISION_LABELS,
        help="the event's answer: its permission, block (continue false), followup, allow or none",
    )
    group.add_argument(
        "--since",
        metavar="TIME",
        help="ISO 8601 (UTC unless it says otherwise), or an age: 30m, 2h, 7d",
    )
    group.add_argument("--until", metavar="TIME", help="as --since; both bounds inclusive")


def _known(flag: str, given: Sequence[str], valid: Sequence[str]) -> tuple[str, ...]:
    """The values as given, or an error naming the first unknown one and every valid one
    (a misspelt filter would otherwise match nothing and look like an empty log)."""
    for value in given:
        if value not in valid:
            raise CloudrunnerError(f"{flag} {value!r} is not one of: {', '.join(valid)}")
    return tuple(given)


def filter_from(args: argparse.Namespace) -> RecordFilter:
    def values(name: str) -> tuple[str, ...]:
        given: Sequence[str] = getattr(args, name, None) or ()
        if name == "kind":
            return _known("--kind", given, [kind.value for kind in RecordKind])
        if name == "event":
            return _known("--event", given, EVENT_NAMES)
        return tuple(given)

    since = getattr(args, "since", None)
    until = getattr(args, "until", None)
    return RecordFilter(
        kinds=values("kind"),
        sessions=values("session"),
        conversations=values("conversation"),
        events=values("event"),
        sources=values("source"),
        commands=values("command"),
        outcomes=values("outcome"),
        decisions=values("decision"),
        since=parse_time(since, flag="--since") if since else None,
        until=parse_time(until, flag="--until") if until else None,
    )
