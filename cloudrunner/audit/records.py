"""The kinds of audit records and the fields the runner fills in for them.

The writer accepts any JSON-able mapping (new fields need no change here); these TypedDicts
name the fields the worker's records use, so the runner gets them checked by mypy and the
documentation (README.md, "The audit log") has one place to point at.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypedDict

from cloudrunner.audit.digest import TextDigest


class RecordKind(StrEnum):
    #: an event about to run its hooks, written and synced before any runs; the event's
    #: later records carry its seq as `event_seq`, and its `decision` record closes it
    RECEIVED = "received"
    #: one hook execution (whatever its outcome, skipped included)
    HOOK = "hook"
    #: the final decision for one event, after the merge
    DECISION = "decision"
    #: an event answered neutrally because the writability gate was closed
    GATED = "gated"
    #: an event refused (not a cloud event, malformed payload, ...)
    REFUSED = "refused"
    #: an event, source or hook skipped without running (prompt hook, user source, ...)
    SKIPPED = "skipped"
    #: a project's `.cursor/environment.json` image built (or found built) and its install
    #: command run, with the image and how the install ended
    ENVIRONMENT = "environment"
    #: an orphaned sandbox (left by a worker that died) removed when a worker starts
    REAPED = "reaped"
    #: written by the writer itself: acknowledges bytes left by a writer killed mid-record
    TORN_RECORD = "torn_record"
    #: one connection attempt through the egress proxy, allowed or refused
    EGRESS = "egress"
    #: an event a client answered while no daemon answered (a line of the fallback spool,
    #: taken in when the daemon next starts), or a spool line that was not valid
    FALLBACK = "fallback"


class EventFields(TypedDict, total=False):
    """Fields that identify the event a record belongs to."""

    time: str
    worker: str
    session: str
    conversation_id: str
    generation_id: str
    event: str
    #: the event's input with payload text digested (see PAYLOAD_TEXT_KEYS) and secrets
    #: redacted; only in the record that answers the event (decision, gated, refused): the
    #: one field whose strings are never cut (see cloudrunner/audit/bounds.py)
    payload: dict[str, Any]
    #: why an event, source or hook was gated, refused or skipped
    reason: str
    #: the event's merged answer
    decision: dict[str, Any]


class HookFields(EventFields, total=False):
    """One hook execution."""

    source: str
    source_file: str
    #: sha256 of the hooks file the hook was loaded from
    source_hash: str
    hook_index: int
    command: str
    matcher: str | None
    matched: bool
    sandbox_id: str
    image_digest: str
    runtime: str
    #: the limits the sandbox attested it applied (memory, cpus, pids, timeout, ...)
    limits: dict[str, Any]
    duration_ms: float
    exit_code: int | None
    outcome: str
    #: how the merge used the answer: decided, contributed, overridden, ignored, ...
    merge_use: str
    stdout_excerpt: str
    stderr_excerpt: str
    stdout_digest: TextDigest
    stderr_digest: TextDigest
    #: a failure the sandbox caused (kind, subject, message, the stderr line that showed it)
    sandbox_cause: dict[str, Any]


class FallbackFields(TypedDict, total=False):
    """An event answered by a client without a daemon (see cloudrunner/audit/fallback.py).

    A valid spool line gives every field but `invalid`, `line_sha256` and `line_bytes`; an
    invalid one only `spool`, `spool_line`, `invalid` and (for a line) its sha256 and size."""

    #: the spool file the line was read from, and its line number (0: the file itself)
    spool: str
    spool_line: int
    #: why the line (or the spool) is not a valid spool line
    invalid: str
    #: sha256 of the invalid line's bytes (without its newline), and their count
    line_sha256: str
    line_bytes: int
    #: the client's clock when it answered (the record's `time` is when it was taken in)
    client_time: str
    event: str
    #: blocked or allowed
    outcome: str
    #: what the client answered
    answer: dict[str, Any]
    #: why no daemon answered, as the client said it
    problem: str
    #: flag, env, policy or no-policy: what chose fail-closed or fail-open
    decided_by: str
    #: the daemon id of the fail policy the client read (None: no policy)
    policy_daemon: str | None
    #: cloudrunner-hook (compiled) or cloudrunner hook (Python), and its process id
    client: str
    client_pid: int
    conversation_id: str | None
    generation_id: str | None
    #: sha256 of the payload the client was given on stdin
    payload_sha256: str
    spool_version: int
    #: keys of the spool line that are not spool fields (ignored)
    ignored_keys: list[str]


class TornSpanFields(TypedDict):
    offset: int
    length: int
    sha256: str
