"""Verifying an audit log: walk the rotated set oldest first and check every link.

A record holds when its `hash` matches its content, its `seq` is one more than the record
before it and its `prev_hash` is that record's hash (the first record of the chain: seq 0
and the genesis hash). Lines that are not records must be torn writes acknowledged by the
`torn_record` right after them (same offsets, lengths and sha256); anything else is a
problem, reported with the file, line, seq and what is wrong. After a problem the check
resynchronises on the record it found, so one edit is reported once, not on every line
after it.

What a hash chain cannot show: records cut from the *end* of the newest file. `last_seq`
and `last_hash` in the report are what an operator keeps elsewhere to catch that.

Events are checked too: a `received` record opens an event (its hooks may run from then on)
and the `decision` record whose `event_seq` names it closes it. An event left open is
*incomplete*: reported by the seq of its `received` record, since its hooks may have run
without their records (the disk filled up, the worker died) — or it was still running when
the log was read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, cast

import orjson

from cloudrunner.audit.chain import GENESIS_HASH, is_hash, record_hash
from cloudrunner.audit.lines import parse_record
from cloudrunner.audit.parallel import per_file
from cloudrunner.audit.reader import (
    check_readable,
    log_set,
    not_a_log,
    raw_lines,
    rotated_members,
)
from cloudrunner.audit.records import (
    AnyRecord,
    RecordKind,
    StoredDecision,
    StoredReceived,
    StoredTornRecord,
    any_record,
)
from cloudrunner.audit.rotation import rotated_path


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    seq: int | None
    message: str

    def text(self) -> str:
        seq = f" seq {self.seq}:" if self.seq is not None else ""
        return f"{self.file}:{self.line}:{seq} {self.message}"


@dataclass(frozen=True)
class TornLine:
    file: str
    line: int
    offset: int
    length: int
    sha256: str
    #: seq of the torn_record that acknowledges it; None when none does
    acknowledged_by: int | None


@dataclass
class VerifyReport:
    files: list[str] = field(default_factory=list)
    records: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    last_hash: str | None = None
    torn: list[TornLine] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: events with a `received` record and no `decision`, by the seq of their `received`
    incomplete: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the live file's last line, cut short and not acknowledged: most likely a writer that
    #: crashed mid-write (also in `problems`, since the log does not verify until the next
    #: append acknowledges it)
    truncated: Problem | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and not self.incomplete

    @property
    def verdict(self) -> str:
        """ok; incomplete (the chain holds, but an event has no decision record);
        truncated (the only problem is a torn last record: a crash, not tampering);
        broken (anything else)."""
        if not self.problems:
            return "incomplete" if self.incomplete else "ok"
        if self.problems == [self.truncated]:
            return "truncated"
        return "broken"

    @property
    def first_problem(self) -> Problem | None:
        """The first broken spot in chain order (a missing rotated file comes first)."""
        return self.problems[0] if self.problems else None

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data["verdict"] = self.verdict
        first = self.first_problem
        data["first_problem"] = asdict(first) if first is not None else None
        return data


class _Line(NamedTuple):
    number: int
    offset: int
    data: bytes
    terminated: bool


@dataclass
class _Anchor:
    seq: int
    hash: str
    file: str
    line: int


def log_files(path: Path) -> list[Path]:
    """The rotated set of `path` (`FILE.N` or `FILE.N.gz`), oldest first, then `path`."""
    return log_set(path)


class _Facts(NamedTuple):
    """What the chain check needs of one record (the record itself stays where it was
    parsed: a file's facts travel between processes, so they are plain tuples)."""

    seq: int
    kind: str
    hash: str
    prev_hash: str
    #: the record's content hashes to its `hash`
    hash_ok: bool
    #: a torn_record's `torn` spans, else None
    torn: Any
    #: a `received` record's event name, else None
    opens: str | None = None
    #: a `decision` record's `event_seq` (the event it closes), else None
    closes: int | None = None


class _Seen(NamedTuple):
    """One line of a file, analysed: its facts when it is a record (its bytes are then
    dropped), else whether it is JSON at all (its bytes are kept: torn lines are hashed)."""

    line: _Line
    facts: _Facts | None
    is_json: bool


def _confirmed(data: bytes) -> _Facts | None:
    """The facts of a record whose hash orjson confirms, else None (then the standard
    library decides, as it always did).

    orjson parses and re-serialises (sorted keys, compact) several times faster than the
    standard library. Where the two would read or write a line differently (an integer
    beyond 64 bits, a float such as 1e-07, non-ASCII text), orjson's bytes differ from the
    canonical JSON the writer hashed, the hash does not match, and the line takes the exact
    path; so a match here is the verdict the exact path gives, only sooner."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(value) is not dict:
        return None
    record = any_record(value)
    seq, kind = record.get("seq"), record.get("kind")
    hash_, prev_hash = record.get("hash"), record.get("prev_hash")
    if type(seq) is not int or type(kind) is not str:
        return None
    if not isinstance(hash_, str) or not isinstance(prev_hash, str):
        return None
    if not is_hash(hash_) or not is_hash(prev_hash):
        return None
    body = dict(value)
    del body["hash"]
    try:
        text = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return None
    if hashlib.sha256(text).hexdigest() != hash_:
        return None
    return _Facts(seq, kind, hash_, prev_hash, True, *_kind_facts(record))


def _kind_facts(record: AnyRecord) -> tuple[Any, str | None, int | None]:
    """What the check needs of a record's own kind: a torn_record's `torn` spans (as the
    line holds them: `_acknowledges` checks them), the event a `received` record opens and
    the `event_seq` a `decision` record closes (see the module's docstring). The kind is
    looked up once (this runs for every record), then the record is read as that kind."""
    kind = record.get("kind")
    if kind == RecordKind.RECEIVED:
        event = cast(StoredReceived, record).get("event")
        return None, (event if isinstance(event, str) else "?"), None
    if kind == RecordKind.DECISION:
        event_seq = cast(StoredDecision, record).get("event_seq")
        return None, None, (event_seq if type(event_seq) is int else None)
    if kind == RecordKind.TORN_RECORD:
        return cast(StoredTornRecord, record).get("torn"), None, None
    return None, None, None


def _analyse(line: _Line) -> _Seen:
    if line.data.startswith(b'{"'):
        facts = _confirmed(line.data)
        if facts is not None:
            return _Seen(line._replace(data=b""), facts, True)
    record = parse_record(line.data)
    if record is None:
        return _Seen(line, None, _is_json(line.data))
    facts = _Facts(
        record["seq"],
        record["kind"],
        record["hash"],
        record["prev_hash"],
        record_hash(record) == record["hash"],
        *_kind_facts(record),
    )
    return _Seen(line._replace(data=b""), facts, True)


def analyse_file(path: Path) -> Iterator[_Seen]:
    """Every line of one file, analysed on its own: parsing and re-hashing, which is all of
    what verify costs, and needs no other line, so files are analysed in parallel."""
    for number, offset, data, terminated in raw_lines(path):
        yield _analyse(_Line(number, offset, data, terminated))


#: a `_Seen` in transit between processes: plain tuples pickle several times faster
_Packed = tuple[tuple[Any, ...], tuple[Any, ...] | None, bool]


def _analysed(path: Path, _is_live: bool) -> tuple[list[_Packed], list[str]]:
    """A file's analysis as a parallel task (`audit.parallel`): it has no warnings."""
    return [
        (tuple(s.line), None if s.facts is None else tuple(s.facts), s.is_json)
        for s in analyse_file(path)
    ], []


def _unpacked(packed: list[_Packed]) -> Iterator[_Seen]:
    for line, facts, is_json in packed:
        yield _Seen(_Line(*line), None if facts is None else _Facts(*facts), is_json)


class _Verifier:
    def __init__(self) -> None:
        self.report = VerifyReport()
        self.anchor: _Anchor | None = None
        self.pending: list[_Line] = []
        self.lines_seen = 0
        #: received events not closed yet: seq -> (file, line, event)
        self.open_events: dict[int, tuple[str, int, str]] = {}

    def problem(self, file: str, line: int, seq: int | None, message: str) -> None:
        self.report.problems.append(Problem(file, line, seq, message))

    def check_file(self, path: Path, seen: Iterable[_Seen], *, is_live: bool) -> None:
        """Judge one file's analysed lines, in order, continuing the chain of the last."""
        name = str(path)
        self.report.files.append(name)
        last: _Line | None = None
        for item in seen:
            line = item.line
            self.lines_seen += 1
            last = line
            record = item.facts
            if record is None:
                if item.is_json:
                    self.problem(
                        name,
                        line.number,
                        None,
                        "JSON that is not an audit record (no seq, kind, hash or prev_hash): "
                        "the line was inserted or altered",
                    )
                else:
                    self.pending.append(line)
                continue
            self.check_record(name, line, record)
        self.flush_pending(name, is_live=is_live)
        if last is not None and not last.terminated and not self.report.problems:
            self.report.notes.append(
                f"{name}:{last.number}: the last record lacks its newline (a writer was "
                "interrupted after writing it); the next append terminates it"
            )

    def flush_pending(self, name: str, *, is_live: bool) -> None:
        """Unreadable lines that no torn_record acknowledged."""
        for line in self.pending:
            torn = _torn_line(name, line, None)
            self.report.torn.append(torn)
            tail = is_live and line is self.pending[-1] and not line.terminated
            if tail:
                what = (
                    "a torn record (a writer was interrupted mid-line) that is not "
                    "acknowledged yet; the next append acknowledges it"
                )
            else:
                what = "not an audit record and no torn_record acknowledges it: damaged or inserted"
            self.problem(
                name, line.number, None, f"{len(line.data)} bytes at offset {line.offset}: {what}"
            )
            if tail:
                self.report.truncated = self.report.problems[-1]
        self.pending = []

    def check_record(self, name: str, line: _Line, record: _Facts) -> None:
        seq = record.seq
        is_torn_record = record.kind == RecordKind.TORN_RECORD
        if is_torn_record and self.pending and _acknowledges(record.torn, self.pending):
            for torn in self.pending:
                self.report.torn.append(_torn_line(name, torn, seq))
            self.pending = []
        else:
            self.flush_pending(name, is_live=False)
            if is_torn_record:
                self.problem(
                    name,
                    line.number,
                    seq,
                    "torn_record does not follow the torn lines it names (offsets, lengths or "
                    "sha256 differ): a line was altered, removed or moved",
                )
        if not record.hash_ok:
            self.problem(
                name,
                line.number,
                seq,
                "hash does not match the record's content: the record was altered",
            )
        self.check_link(name, line, record)
        if record.opens is not None:
            self.open_events[seq] = (name, line.number, record.opens)
        elif record.closes is not None:
            self.open_events.pop(record.closes, None)
        self.report.records += 1
        if self.report.first_seq is None:
            self.report.first_seq = seq
        self.report.last_seq, self.report.last_hash = seq, record.hash
        self.anchor = _Anchor(seq, record.hash, name, line.number)

    def check_link(self, name: str, line: _Line, record: _Facts) -> None:
        seq = record.seq
        prev_hash = record.prev_hash
        anchor = self.anchor
        if anchor is None:
            if seq != 0 or prev_hash != GENESIS_HASH:
                self.problem(
                    name,
                    line.number,
                    seq,
                    f"the chain starts at seq {seq} instead of seq 0 with the genesis hash: "
                    "earlier records (or rotated files) were removed",
                )
            return
        where = f"seq {anchor.seq} ({anchor.file}:{anchor.line})"
        if seq == anchor.seq + 1:
            if prev_hash != anchor.hash:
                self.problem(
                    name,
                    line.number,
                    seq,
                    f"prev_hash does not match the hash of {where}: a record was altered, "
                    "replaced or inserted",
                )
        elif seq > anchor.seq + 1:
            missing = seq - anchor.seq - 1
            self.problem(
                name,
                line.number,
                seq,
                f"follows {where}: {missing} record{'s' if missing > 1 else ''} "
                f"(seq {anchor.seq + 1}..{seq - 1}) removed",
            )
        else:
            self.problem(
                name,
                line.number,
                seq,
                f"follows {where}: records are out of order or duplicated "
                f"(expected seq {anchor.seq + 1})",
            )


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def _torn_line(name: str, line: _Line, acknowledged_by: int | None) -> TornLine:
    return TornLine(
        name,
        line.number,
        line.offset,
        len(line.data),
        hashlib.sha256(line.data).hexdigest(),
        acknowledged_by,
    )


def _acknowledges(spans: Any, lines: list[_Line]) -> bool:
    if not isinstance(spans, list) or len(spans) != len(lines):
        return False
    for span, line in zip(spans, lines, strict=True):
        expected = {
            "offset": line.offset,
            "length": len(line.data),
            "sha256": hashlib.sha256(line.data).hexdigest(),
        }
        if span != expected:
            return False
    return True


def verify_log(path: Path | str, *, jobs: int = 1) -> VerifyReport:
    """Check the chain of `path` and its rotated files; raises AuditLogError if unreadable.
    `jobs` > 1: the files are analysed in that many processes (the judgement that links
    them stays in this one, in file order, so the report is the same)."""
    path = Path(path)
    check_readable(path)
    files = log_files(path)
    verifier = _Verifier()
    numbers = sorted(rotated_members(path))
    expected = list(range(1, len(numbers) + 1))
    if numbers != expected:
        missing = sorted(set(range(1, max(numbers) + 1)) - set(numbers))
        verifier.problem(
            str(path),
            0,
            None,
            "rotated files missing from the set: "
            + ", ".join(str(rotated_path(path, n)) for n in missing),
        )
    if jobs <= 1:
        for file in files:
            verifier.check_file(file, analyse_file(file), is_live=file == path)
    else:
        work = [(file, file == path) for file in files]
        with contextlib.closing(per_file(_analysed, work, jobs)) as parts:
            for (file, is_live), (packed, _none) in zip(work, parts, strict=True):
                verifier.check_file(file, _unpacked(packed), is_live=is_live)
    report = verifier.report
    for seq, (name, line, event) in sorted(verifier.open_events.items()):
        report.incomplete.append(
            Problem(
                name,
                line,
                seq,
                f"the {event} event received here has no decision record: its hooks may "
                "have run without their records (disk full, I/O error, a killed worker), "
                "or it was still running when the log was read",
            )
        )
    if report.records == 0 and verifier.lines_seen > 0:
        raise not_a_log(str(path), "it holds no audit record")
    return report
