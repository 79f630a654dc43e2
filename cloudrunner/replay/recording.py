"""Recording answered events into a replayable event stream (`run --record FILE`,
settings `audit.record_path`).

The worker calls `record_event` once per answered event with the audit records it just
appended; the entry is built from them: the event's payload and answer (from the
`decision` record), the commit and workspace, and per hook its source, hooks-file sha256,
outcome and image digest (from the `hook` records). It passes through the audit log's own
rules first (`normalise`): secrets are redacted, and payload text is kept (so the event
replays as it came) unless `audit.record_payload_text` is false, which stores it as sha256
and length like the audit log. Where that changed the payload, the entry lists the JSON
pointers in `altered`, so a replay can say why a hook may have seen different input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from cloudrunner.audit.processors import clean_record, format_time, json_value, utc_now
from cloudrunner.audit.records import DecisionFields, HookFields, RecordKind
from cloudrunner.replay.stream import STREAM_FORMAT, append_entry
from cloudrunner.settings import Settings


def recorded_hook(hook: HookFields) -> dict[str, Any]:
    """What a recorded entry keeps of a hook record (None for a field it lacks)."""
    return {
        "source": hook.get("source"), "source_file": hook.get("source_file"),
        "source_hash": hook.get("source_hash"), "hook_index": hook.get("hook_index"),
        "command": hook.get("command"), "matched": hook.get("matched"),
        "outcome": hook.get("outcome"), "exit_code": hook.get("exit_code"),
        "merge_use": hook.get("merge_use"), "image_digest": hook.get("image_digest"),
    }  # fmt: skip


def normalise(fields: Mapping[str, Any], *, include_payload_text: bool) -> dict[str, Any]:
    """`fields` as the audit log would store them: JSON values, payload text digested
    (unless `include_payload_text`), secrets redacted."""
    return clean_record(fields, include_payload_text=include_payload_text)


def changed_pointers(before: Any, after: Any, pointer: str = "") -> list[str]:
    """JSON pointers where `after` differs from `before` (the outermost spot of a change)."""
    if isinstance(before, dict) and isinstance(after, dict) and before.keys() == after.keys():
        out: list[str] = []
        for key in before:
            escaped = str(key).replace("~", "~0").replace("/", "~1")
            out += changed_pointers(before[key], after[key], f"{pointer}/{escaped}")
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out = []
        for index, (a, b) in enumerate(zip(before, after, strict=True)):
            out += changed_pointers(a, b, f"{pointer}/{index}")
        return out
    return [] if before == after else [pointer or "/"]


def build_entry(
    settings: Settings, records: Sequence[tuple[RecordKind | str, Mapping[str, Any]]]
) -> dict[str, Any] | None:
    """The stream entry for one answered event, or None when `records` hold no decision."""
    # the records as the event wrote them (kind, fields): typed by their kind
    decision = next(
        (cast(DecisionFields, f) for kind, f in records if kind == RecordKind.DECISION), None
    )
    if decision is None:
        return None
    written = [cast(HookFields, f) for kind, f in records if kind == RecordKind.HOOK]
    hooks = [recorded_hook(hook) for hook in written]
    sources: dict[tuple[str, str], dict[str, Any]] = {}
    for hook in written:
        key = (str(hook.get("source")), str(hook.get("source_file")))
        described = {"source": hook.get("source"), "file": hook.get("source_file")}
        sources.setdefault(key, {**described, "sha256": hook.get("source_hash")})
    include_text = settings.audit.record_payload_text
    raw_payload = {"payload": json_value(decision.get("payload", {}), "payload")}
    entry = normalise(
        {
            "stream": STREAM_FORMAT,
            "time": format_time(utc_now()),
            "worker": settings.effective_worker_id,
            "event": decision.get("event"),
            "conversation_id": decision.get("conversation_id"),
            "payload": raw_payload["payload"],
            "expected": decision.get("decision"),
            "match": "exact",
            "blocked_by": decision.get("blocked_by"),
            "commit": decision.get("commit"),
            "workspace": decision.get("workspace"),
            "repo": settings.workspace.repo or None,
            "payload_text": include_text,
            "hooks": hooks,
            "sources": list(sources.values()),
            "image_digests": sorted(
                {str(digest) for hook in written if (digest := hook.get("image_digest"))}
            ),
        },
        include_payload_text=include_text,
    )
    entry["altered"] = changed_pointers(raw_payload["payload"], entry["payload"])
    return entry


def record_event(
    settings: Settings, records: Sequence[tuple[RecordKind | str, Mapping[str, Any]]]
) -> None:
    """Append the event's entry to the stream at `audit.record_path` (nothing when unset)."""
    path = settings.audit.record_path
    if path is None:
        return
    entry = build_entry(settings, records)
    if entry is not None:
        append_entry(path, entry, sync=settings.audit.fsync == "always")
