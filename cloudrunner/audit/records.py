"""The kinds of audit records and the fields the runner fills in for them.

The writer accepts any JSON-able mapping; these TypedDicts name the fields of every record
kind the worker writes. The worker builds its records only through
`cloudrunner.event.records`, whose builders return these types, so mypy checks each record
the code writes against its kind's fields.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypedDict

from cloudrunner.audit.digest import TextDigest

if TYPE_CHECKING:
    from cloudrunner.audit.pipeline import Cleaned


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
    #: the seq of the event's `received` record (every later record of the event)
    event_seq: int


class HookFields(EventFields, total=False):
    """One hook execution."""

    source: str
    source_file: str
    #: sha256 of the hooks file the hook was loaded from
    source_hash: str | None
    hook_index: int
    command: str
    matcher: str | None
    matched: bool
    match_reason: str
    commit: str | None
    sandbox_id: str
    image_digest: str | None
    runtime: str | None
    #: the limits the sandbox attested it applied (memory, cpus, pids, timeout, ...),
    #: already cleaned (see AuditWriter.cleaned)
    limits: Cleaned | dict[str, Any]
    #: what the engine reported about the hook's container, already cleaned
    attestation: Cleaned | dict[str, Any]
    duration_ms: float
    exit_code: int | None
    outcome: str
    #: how the merge used the answer: decided, contributed, overridden, ignored, ...
    merge_use: str
    #: each answer field and what the merge did with it
    merge_fields: list[dict[str, Any]]
    stdout_excerpt: str
    stderr_excerpt: str
    stdout_bytes: int
    stderr_bytes: int
    stdout_digest: TextDigest
    stderr_digest: TextDigest
    #: a failure the sandbox caused (kind, subject, message, the stderr line that showed it)
    sandbox_cause: dict[str, Any]


class ReceivedFields(EventFields, total=False):
    """An event about to run its hooks."""

    workspace: str
    commit: str | None
    #: the ids of the hooks planned to run
    hooks: list[str]
    #: present (true) when the payload named no workspace_roots
    workspace_roots_absent: bool


class GatedFields(EventFields, total=False):
    """An event answered neutrally while the writability gate was closed."""

    gate: dict[str, Any]


class RefusedFields(EventFields, total=False):
    """An event refused before any hook ran."""


class SkippedFields(EventFields, total=False):
    """A diagnostic of a source (skipped, broken, ...)."""

    source: str
    source_file: str | None
    source_hash: str | None
    source_status: str
    diagnostic: dict[str, Any]


class DecisionFields(EventFields, total=False):
    """The event's merged answer, closing it."""

    workspace: str
    commit: str | None
    blocked_by: str | None
    #: how many hooks were planned (run or not)
    hooks: int
    #: how the hooks got the owner's access to the workspace
    workspace_access: dict[str, Any]
    transcript: dict[str, Any]
    homes: dict[str, Any]


class EnvironmentFields(TypedDict, total=False):
    """A repository's environment image built and its install command run."""

    image: str
    image_id: str
    built: bool
    install: str
    commit: str | None
    outcome: str
    exit_code: int | None
    duration_ms: float
    stdout_excerpt: str
    stderr_excerpt: str
    sandbox_id: str


class ReapedFields(TypedDict, total=False):
    """An orphaned sandbox removed at start."""

    container_id: str
    container_name: str
    owner: str
    status: str
    reason: str


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
