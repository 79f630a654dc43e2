"""The fallback spool: events a client answered while no daemon answered, taken into the
audit log as `fallback` records when the daemon next starts.

Clients append one JSON object per line to `fallback.spool` in the daemon's run directory
(the directory of its unix socket), each line at most `MAX_LINE_BYTES`, the file at most
`SPOOL_BOUND`. At start, before it serves, the daemon renames the spool to
`fallback.spool.ingesting` (a leftover `.ingesting` from a crash is read first), appends one
`fallback` record per line, syncs the log, then removes the file.

The spool is written by other processes, so every line is untrusted: a line that is not a
valid spool line (not JSON, a wrong type, a missing field, over the line bound) becomes a
record with `invalid` saying why and the sha256 of its bytes, never its text. Only the known
fields are copied; the spool's `time` and `pid` become `client_time` and `client_pid` (the
record's own `time` and `pid` are the daemon's, as in every record). The file is opened
without following a symlink and only when it is a regular file; past `2 * SPOOL_BOUND` bytes,
or `MAX_INVALID_RECORDS` invalid lines, the rest is summed up in one record.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudrunner.audit.failures import AuditLogError
from cloudrunner.audit.records import Entry, FallbackFields, RecordKind
from cloudrunner.audit.writer import AuditWriter

SPOOL_FILE = "fallback.spool"
INGESTING_FILE = "fallback.spool.ingesting"
SPOOL_VERSION = 1
#: a spool line's bound (its bytes without the newline)
MAX_LINE_BYTES = 4096
#: the clients' bound on the spool's size
SPOOL_BOUND = 1024 * 1024
#: how much of one file is read as lines (the bound, with room for clients racing it)
READ_BOUND = 2 * SPOOL_BOUND
#: invalid lines recorded one by one; the rest are counted in one record
MAX_INVALID_RECORDS = 100
#: records per append (one lock, one write batch)
_BATCH = 256
#: how deep a client's answer may nest (a Cursor answer is a flat object)
_MAX_ANSWER_DEPTH = 4

OUTCOMES = frozenset({"blocked", "allowed"})
DECIDED_BY = frozenset({"flag", "env", "policy", "no-policy"})
CLIENTS = frozenset({"cloudrunner-hook", "cloudrunner hook"})
_ID_CAP = 200
_TEXT_CAP = MAX_LINE_BYTES


@dataclass
class IngestReport:
    """What one ingestion did: records written, of them invalid, and problems (one line
    each) that left a spool in place for the next start."""

    records: int = 0
    invalid: int = 0
    problems: tuple[str, ...] = ()
    #: records written by what the client answered: blocked, allowed, or invalid
    outcomes: dict[str, int] = field(default_factory=dict)


class _Invalid(Exception):
    pass


def _text(doc: dict[str, Any], key: str, *, cap: int = _TEXT_CAP, null: bool = False) -> Any:
    if key not in doc:
        raise _Invalid(f'the field "{key}" is missing')
    value = doc[key]
    if value is None and null:
        return None
    if not isinstance(value, str):
        kind = "a string or null" if null else "a string"
        raise _Invalid(f'"{key}" must be {kind}, not {_type_name(value)}')
    if len(value) > cap:
        raise _Invalid(f'"{key}" is {len(value)} characters, over {cap}')
    return value


def _choice(doc: dict[str, Any], key: str, allowed: frozenset[str]) -> str:
    value = _text(doc, key, cap=64)
    if value not in allowed:
        raise _Invalid(f'"{key}" must be one of {", ".join(sorted(allowed))}, not {value!r}')
    return str(value)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _depth(value: Any, level: int = 0) -> int:
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _no_constant(name: str) -> Any:
    raise _Invalid(f"the line holds {name}, which JSON does not allow")


def parse_line(raw: bytes) -> FallbackFields:
    """The fields a valid spool line gives its `fallback` record; raises ValueError (its
    message says why) for an invalid one."""
    try:
        return _parse(raw)
    except _Invalid as exc:
        raise ValueError(str(exc)) from None


def _parse(raw: bytes) -> FallbackFields:
    if len(raw) > MAX_LINE_BYTES:
        raise _Invalid(f"the line is {len(raw)} bytes, over the {MAX_LINE_BYTES}-byte bound")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Invalid(f"the line is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        raise _Invalid("the line is empty")
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise _Invalid("the line nests too deeply") from None
    except ValueError as exc:
        raise _Invalid(f"the line is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise _Invalid(f"the line must be a JSON object, not {_type_name(doc)}")
    missing = sorted(_KNOWN.difference(doc))
    if missing:
        raise _Invalid(f"the field(s) {', '.join(missing)} are missing")
    version = doc.get("version")
    if type(version) is not int or version != SPOOL_VERSION:
        raise _Invalid(f'"version" must be {SPOOL_VERSION}, not {version!r}'[:200])
    answer = doc.get("answer")
    if not isinstance(answer, dict):
        raise _Invalid(f'"answer" must be an object, not {_type_name(answer)}')
    if _depth(answer) > _MAX_ANSWER_DEPTH:
        raise _Invalid(f'"answer" nests deeper than {_MAX_ANSWER_DEPTH} levels')
    pid = doc.get("pid")
    if type(pid) is not int or pid < 0:
        raise _Invalid(f'"pid" must be a non-negative integer, not {_type_name(pid)}')
    digest = _text(doc, "payload_sha256", cap=64)
    if len(digest) != 64 or digest.strip("0123456789abcdef"):
        raise _Invalid('"payload_sha256" must be 64 lowercase hex digits')
    fields: FallbackFields = {
        "client_time": _text(doc, "time", cap=64),
        "event": _text(doc, "event", cap=_ID_CAP),
        "outcome": _choice(doc, "outcome", OUTCOMES),
        "answer": answer,
        "problem": _text(doc, "problem"),
        "decided_by": _choice(doc, "decided_by", DECIDED_BY),
        "policy_daemon": _text(doc, "policy_daemon", cap=_ID_CAP, null=True),
        "client": _choice(doc, "client", CLIENTS),
        "client_pid": pid,
        "conversation_id": _text(doc, "conversation_id", cap=_ID_CAP, null=True),
        "generation_id": _text(doc, "generation_id", cap=_ID_CAP, null=True),
        "payload_sha256": digest,
        "spool_version": version,
    }
    extra = sorted(key[:64] for key in doc if key not in _KNOWN)
    if extra:
        fields["ignored_keys"] = extra[:20]
    return fields


_KNOWN = frozenset(
    {
        "version", "time", "event", "outcome", "answer", "problem", "decided_by",
        "policy_daemon", "client", "pid", "conversation_id", "generation_id",
        "payload_sha256",
    }
)  # fmt: skip


def _lines(fd: int) -> Iterator[tuple[bytes, int, str]]:
    """(the line or its first MAX_LINE_BYTES + 1 bytes, its length and sha256, all without
    its newline) for each line of the first READ_BOUND bytes (a line running past them is
    cut there); then, if the file goes on, (b"", -the bytes left, "")."""
    with os.fdopen(os.dup(fd), "rb", buffering=65536) as fh:
        consumed = 0
        while consumed < READ_BOUND:
            chunk = fh.readline(MAX_LINE_BYTES + 2)
            if not chunk:
                return
            head = chunk.removesuffix(b"\n")
            digest = hashlib.sha256(head)  # of the line's bytes, without its newline
            length, consumed = len(head), consumed + len(chunk)
            while not chunk.endswith(b"\n") and consumed < READ_BOUND:
                chunk = fh.readline(65536)
                if not chunk:
                    break
                part = chunk.removesuffix(b"\n")
                digest.update(part)
                length, consumed = length + len(part), consumed + len(chunk)
            yield head, length, digest.hexdigest()
        rest = os.fstat(fd).st_size - consumed
        if rest > 0:
            yield b"", -rest, ""


def read_spool(path: Path) -> tuple[list[FallbackFields], int]:
    """The fields of a `fallback` record for each line of the spool at `path`, and how many
    of them are invalid. Raises OSError when the file cannot be opened; a symlink or a file
    that is not a regular file gives one invalid record (it is never read)."""
    spool = str(path.with_name(SPOOL_FILE))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        return [_refused_file(spool, "is a symbolic link; it was not followed")], 1
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return [_refused_file(spool, "is not a regular file; it was not read")], 1
        return _records(fd, spool)
    finally:
        os.close(fd)


def _refused_file(spool: str, why: str) -> FallbackFields:
    return {"spool": spool, "spool_line": 0, "invalid": f"the spool {why}"}


def _records(fd: int, spool: str) -> tuple[list[FallbackFields], int]:
    out: list[FallbackFields] = []
    invalid = 0
    skipped: list[int] = []
    number = 0
    for body, length, digest in _lines(fd):
        if length < 0:
            invalid += 1
            out.append(
                {
                    "spool": spool,
                    "spool_line": number + 1,
                    "invalid": f"the spool goes on {-length} bytes past the {READ_BOUND} "
                    "read as lines (clients keep it under 1 MiB); the rest was not read",
                    "line_bytes": -length,
                }
            )
            break
        number += 1
        try:
            if length > MAX_LINE_BYTES:
                raise _Invalid(f"the line is {length} bytes, over the {MAX_LINE_BYTES}-byte bound")
            fields = _parse(body)
        except _Invalid as exc:
            invalid += 1
            if invalid > MAX_INVALID_RECORDS:
                skipped.append(number)
                continue
            out.append(
                {
                    "spool": spool,
                    "spool_line": number,
                    "invalid": str(exc),
                    "line_sha256": digest,
                    "line_bytes": length,
                }
            )
            continue
        out.append({"spool": spool, "spool_line": number, **fields})
    if skipped:
        out.append(
            {
                "spool": spool,
                "spool_line": skipped[0],
                "invalid": f"{len(skipped)} more invalid lines (from line {skipped[0]} to "
                f"{skipped[-1]}) past the first {MAX_INVALID_RECORDS}, not recorded one by one",
            }
        )
    return out, invalid


def ingest(run_dir: Path, audit: AuditWriter) -> IngestReport:
    """Take the spool in `run_dir` (and a leftover from a crash) into the audit log; never
    raises for an expected problem: a spool that cannot be taken stays for the next start,
    and the report says why."""
    report = IngestReport()
    spool, ingesting = run_dir / SPOOL_FILE, run_dir / INGESTING_FILE
    problems: list[str] = []
    try:
        # one ingestion at a time: an exclusive lock on the run directory itself
        lock = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for leftover in (True, False):
                if not leftover:
                    if not os.path.lexists(spool):
                        break
                    os.rename(spool, ingesting)  # a symlink is renamed, not followed
                elif not os.path.lexists(ingesting):
                    continue
                if not _take(ingesting, audit, report, problems):
                    break
        finally:
            os.close(lock)
    except OSError as exc:
        problems.append(
            f"the fallback spool in {run_dir} cannot be taken ({exc.strerror or exc}); "
            "the events clients answered without a daemon are not in the audit log yet: "
            "fix the directory's permissions, they are taken at the next start"
        )
    report.problems = tuple(problems)
    return report


def _take(path: Path, audit: AuditWriter, report: IngestReport, problems: list[str]) -> bool:
    try:
        records, invalid = read_spool(path)
    except OSError as exc:
        problems.append(
            f"the fallback spool {path} cannot be read ({exc.strerror or exc}); it is kept "
            "for the next start"
        )
        return False
    try:
        for start in range(0, len(records), _BATCH):
            batch = records[start : start + _BATCH]
            entries: list[Entry] = [(RecordKind.FALLBACK, fields) for fields in batch]
            audit.append_many(entries)
        audit.sync()
    except (AuditLogError, OSError) as exc:
        problems.append(
            f"the {len(records)} line(s) of the fallback spool {path} could not all be "
            f"recorded ({exc}); it is kept and taken again at the next start (lines already "
            "recorded will be recorded twice)"
        )
        return False
    os.unlink(path)
    report.records += len(records)
    report.invalid += invalid
    for fields in records:
        outcome = "invalid" if "invalid" in fields else str(fields.get("outcome"))
        report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
    return True
