"""The kinds of audit records, the fields of each, and typed views for reading them back.

One definition for both sides of the log. Every writer builds a kind's fields as its
TypedDict (`HookFields`, `EgressFields`, ...; the event's records come from the builders of
`cloudrunner.event.record_builders`, the spool's from `audit.fallback`, the torn-write
acknowledgement from the writer itself), so mypy checks every key it writes; they hand
it to the writer as an `Entry`, a kind paired with that kind's fields, so a kind written
with another kind's fields is a mypy error too. The writer
adds the `Envelope` (seq, kind, time, worker, pid, prev_hash, hash) to every record. A
reader turns a parsed record into its kind's stored type with `view(record,
RecordKind.HOOK)` (None for a record of another kind) or, before it knows the kind, reads
it as an `AnyRecord`; either way mypy checks each key it reads as it checks a writer's,
`.get` included (the project's mypy plugin, `typecheck/typeddict_keys.py`, makes a `.get`
of a key the type lacks an error). A wrong key in a hash-chained log cannot be mended, so
kinds are compared as `RecordKind` members, never as strings, and no key goes unchecked.
The types say what a record may hold, not what a line read back holds: old or damaged logs
may hold anything, so a reader still checks a value's type before it relies on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Literal, NotRequired, TypedDict, cast, overload

from cloudrunner.audit.digest import TextDigest

if TYPE_CHECKING:
    from cloudrunner.audit.processors import Cleaned


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


class Envelope(TypedDict):
    """What the writer adds to every record, whatever its kind (a record lacking one of the
    required keys is not read as a record at all)."""

    #: the record's place in the chain, from 0
    seq: int
    #: a `RecordKind` value
    kind: str
    #: hex sha256 of the record before it (the genesis hash for seq 0), and of this record
    prev_hash: str
    hash: str
    #: when the record was written (UTC, ISO 8601, microseconds), unless the runner gave it
    time: NotRequired[str]
    #: the worker and the process that wrote it
    worker: NotRequired[str]
    pid: NotRequired[int]


class EventFields(TypedDict, total=False):
    """Fields that identify the event a record belongs to."""

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
    #: the daemon's variables the operator's allowlist passed, refused and missed (names)
    passed_env: dict[str, Any]


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


class TornRecordFields(TypedDict):
    """Written by the writer itself: the torn lines it acknowledges, oldest first."""

    torn: list[TornSpanFields]


class EgressRunFields(TypedDict):
    """A run an egress attempt may belong to (the credential's, or one of its sandbox's)."""

    source: str
    session: str
    event: str
    conversation_id: str
    generation_id: str
    hook_id: str


class EgressSandboxFields(TypedDict):
    """The sandbox an egress attempt came from, by its network address."""

    session: str
    source: str
    network: str
    runs: list[EgressRunFields]


class EgressFields(TypedDict, total=False):
    """One connection attempt through the egress proxy and the run it is attributed to, or
    one of the proxy's own events (then only `proxy_event`)."""

    #: allowed or refused
    decision: str
    host: str
    port: int | None
    method: str
    #: the HTTP status the proxy answered, and the bytes each way
    status: int
    bytes_to_hook: int
    bytes_from_hook: int
    #: the proxy's own result code, and its clock (epoch seconds)
    proxy_result: str
    proxy_time: float
    client_address: str
    #: the run the attempt is attributed to ("unknown" source: none)
    source: str
    session: str | None
    event: str
    conversation_id: str
    generation_id: str
    hook_id: str
    command: str
    #: why the proxy refused the credential (not-live, expired, wrong-source)
    refusal: str
    #: how the attempt was attributed, when not by its own run's credential
    attribution: str
    #: the run a credential refused outside its run was issued to
    credential_run: EgressRunFields
    used_from: EgressSandboxFields | None
    #: the proxy replaced (action, container, reason)
    proxy_event: dict[str, Any]


# -- records as stored: the envelope and the kind's fields ------------------------------------


class StoredReceived(Envelope, ReceivedFields):
    """A `received` record as the log stores it."""


class StoredHook(Envelope, HookFields):
    """A `hook` record as the log stores it."""


class StoredDecision(Envelope, DecisionFields):
    """A `decision` record as the log stores it."""


class StoredGated(Envelope, GatedFields):
    """A `gated` record as the log stores it."""


class StoredRefused(Envelope, RefusedFields):
    """A `refused` record as the log stores it."""


class StoredSkipped(Envelope, SkippedFields):
    """A `skipped` record as the log stores it."""


class StoredEnvironment(Envelope, EnvironmentFields):
    """A `environment` record as the log stores it."""


class StoredReaped(Envelope, ReapedFields):
    """A `reaped` record as the log stores it."""


class StoredTornRecord(Envelope, TornRecordFields):
    """A `torn_record` record as the log stores it."""


class StoredEgress(Envelope, EgressFields):
    """A `egress` record as the log stores it."""


class StoredFallback(Envelope, FallbackFields):
    """A `fallback` record as the log stores it."""


class AnyRecord(Envelope, total=False):
    """A record before its kind is looked at: the envelope, and the fields readers compare
    across kinds (the filters, the table's columns). Their values are `object`: what one
    holds depends on the kind (an egress record's `decision` is a word, an event's answer a
    mapping), so a reader checks it. Every key here is a field of some kind (a unit test
    keeps it so); for anything else, take the kind's own view with `view`."""

    session: object
    conversation_id: object
    event: object
    source: object
    command: object
    outcome: object
    reason: object
    decision: object
    duration_ms: object
    commit: object


#: one record as a writer takes it: a kind with that kind's fields (mypy refuses a kind
#: paired with another kind's fields); `torn_record` is the writer's own
Entry = (
    tuple[Literal[RecordKind.RECEIVED], ReceivedFields]
    | tuple[Literal[RecordKind.HOOK], HookFields]
    | tuple[Literal[RecordKind.DECISION], DecisionFields]
    | tuple[Literal[RecordKind.GATED], GatedFields]
    | tuple[Literal[RecordKind.REFUSED], RefusedFields]
    | tuple[Literal[RecordKind.SKIPPED], SkippedFields]
    | tuple[Literal[RecordKind.ENVIRONMENT], EnvironmentFields]
    | tuple[Literal[RecordKind.REAPED], ReapedFields]
    | tuple[Literal[RecordKind.EGRESS], EgressFields]
    | tuple[Literal[RecordKind.FALLBACK], FallbackFields]
)

#: each kind's fields as its writer gives them
FIELDS: Final[Mapping[RecordKind, type[Mapping[str, Any]]]] = {
    RecordKind.RECEIVED: ReceivedFields,
    RecordKind.HOOK: HookFields,
    RecordKind.DECISION: DecisionFields,
    RecordKind.GATED: GatedFields,
    RecordKind.REFUSED: RefusedFields,
    RecordKind.SKIPPED: SkippedFields,
    RecordKind.ENVIRONMENT: EnvironmentFields,
    RecordKind.REAPED: ReapedFields,
    RecordKind.TORN_RECORD: TornRecordFields,
    RecordKind.EGRESS: EgressFields,
    RecordKind.FALLBACK: FallbackFields,
}

#: each kind's record as the log stores it (`view` returns these)
STORED: Final[Mapping[RecordKind, type[Mapping[str, Any]]]] = {
    RecordKind.RECEIVED: StoredReceived,
    RecordKind.HOOK: StoredHook,
    RecordKind.DECISION: StoredDecision,
    RecordKind.GATED: StoredGated,
    RecordKind.REFUSED: StoredRefused,
    RecordKind.SKIPPED: StoredSkipped,
    RecordKind.ENVIRONMENT: StoredEnvironment,
    RecordKind.REAPED: StoredReaped,
    RecordKind.TORN_RECORD: StoredTornRecord,
    RecordKind.EGRESS: StoredEgress,
    RecordKind.FALLBACK: StoredFallback,
}


#: a record as parsed from its line
Parsed = Mapping[str, Any]


def any_record(record: Parsed) -> AnyRecord:
    """A parsed record (its envelope checked by the reader that parsed it), typed."""
    return cast(AnyRecord, record)


@overload
def view(record: Parsed, kind: Literal[RecordKind.RECEIVED]) -> StoredReceived | None: ...
@overload
def view(record: Parsed, kind: Literal[RecordKind.HOOK]) -> StoredHook | None: ...
@overload
def view(record: Parsed, kind: Literal[RecordKind.DECISION]) -> StoredDecision | None: ...
@overload
def view(record: Parsed, kind: Literal[RecordKind.GATED]) -> StoredGated | None: ...
@overload
def view(record: Parsed, kind: Literal[RecordKind.REFUSED]) -> StoredRefused | None: ...
@overload
def view(record: Parsed, kind: Literal[RecordKind.SKIPPED]) -> StoredSkipped | None: ...
@overload
def view(record: Parsed, kind: Literal[RecordKind.ENVIRONMENT]) -> StoredEnvironment | None: ...
@overload
def view(record: Parsed, kind: Literal[RecordKind.REAPED]) -> StoredReaped | None: ...
@overload
def view(record: Parsed, kind: Literal[RecordKind.TORN_RECORD]) -> StoredTornRecord | None: ...
@overload
def view(record: Parsed, kind: Literal[RecordKind.EGRESS]) -> StoredEgress | None: ...
@overload
def view(record: Parsed, kind: Literal[RecordKind.FALLBACK]) -> StoredFallback | None: ...
def view(record: Parsed, kind: RecordKind) -> Parsed | None:
    """`record` as its kind's stored type when it is of `kind`, else None. Only the kind is
    checked: the fields are the log's, and a reader checks a value before relying on it."""
    return record if record.get("kind") == kind else None
