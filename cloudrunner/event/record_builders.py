"""The records an event writes, one builder per kind, each returning its kind's fields as
`cloudrunner.audit.records` types them (so mypy checks every record the worker writes)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from cloudrunner import workspace
from cloudrunner.audit import AuditWriter, RecordKind
from cloudrunner.audit.processors import Cleaned
from cloudrunner.audit.records import (
    DecisionFields,
    Entry,
    EnvironmentFields,
    GatedFields,
    HookFields,
    ReapedFields,
    ReceivedFields,
    RefusedFields,
    SkippedFields,
)
from cloudrunner.event import transcript
from cloudrunner.event.gate import GateDecision
from cloudrunner.event.homes import Home
from cloudrunner.event.intake import EventIds, safe_text
from cloudrunner.event.runner import RunOutcome
from cloudrunner.memo import BoundedMemo
from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import Severity
from cloudrunner.protocol.merge import MergedAnswer
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sandbox.base import ExecResult
from cloudrunner.sandbox.reaper import Orphan
from cloudrunner.sources import LoadedSource, SourceSet, SourceStatus
from cloudrunner.workspace import ownership


def append(audit: AuditWriter, entry: Entry) -> None:
    """Write one record of the worker's now (durable as the writer's settings say)."""
    audit.append(*entry)


class RecordIds(EventIds):
    """An event's ids on its records after `received`: with that record's seq."""

    event_seq: int


def refused(
    event: str, document: Mapping[str, Any], reason: str, *, keep_payload: bool
) -> RefusedFields:
    """`keep_payload` False for a payload that cannot be encoded (its ids are kept escaped,
    the payload itself not at all)."""
    return {
        "event": safe_text(event),
        "conversation_id": safe_text(document.get("conversation_id")),
        "generation_id": safe_text(document.get("generation_id")),
        "payload": dict(document) if keep_payload else {},
        "reason": reason,
    }


def gated(
    ids: EventIds, document: dict[str, Any], decision: GateDecision, answer: dict[str, Any]
) -> GatedFields:
    return {
        "conversation_id": ids["conversation_id"],
        "generation_id": ids["generation_id"],
        "event": ids["event"],
        "session": ids["conversation_id"],
        "payload": document,
        "reason": decision.reason,
        "gate": {"mode": str(decision.mode), "generation": decision.generation},
        "decision": answer,
    }


def received(
    ids: EventIds, session: str, ws: workspace.Workspace, hooks: list[str], roots_absent: bool
) -> ReceivedFields:
    fields: ReceivedFields = {
        "conversation_id": ids["conversation_id"],
        "generation_id": ids["generation_id"],
        "event": ids["event"],
        "session": session,
        "workspace": str(ws.root),
        "commit": ws.commit,
        "hooks": hooks,
    }
    if roots_absent:
        fields["workspace_roots_absent"] = True
    return fields


def skipped(sources: SourceSet, seen: Mapping[str, str], ids: RecordIds) -> list[Entry]:
    """One `skipped` record per diagnostic of a source the conversation has not seen in
    this version yet (a skipped user source, a prompt hook, a broken file, ...)."""
    out: list[Entry] = []
    for source in sources.sources:
        # A broken source is reported on every event (its hooks did not run); anything
        # else once per conversation and file version.
        unseen = seen.get(source_key(source)) != (source.sha256 or "")
        if source.status is not SourceStatus.BROKEN and not unseen:
            continue
        for diagnostic in source.diagnostics:
            # a missing file the operator configured (an error) is recorded
            if (
                diagnostic.code == DiagnosticCode.SOURCE_ABSENT
                and diagnostic.severity != Severity.ERROR
            ):
                continue
            fields: SkippedFields = {
                "conversation_id": ids["conversation_id"],
                "generation_id": ids["generation_id"],
                "event": ids["event"],
                "event_seq": ids["event_seq"],
                "source": source.kind.value,
                "source_file": str(source.path) if source.path else None,
                "source_hash": source.sha256,
                "source_status": str(source.status),
                "reason": diagnostic.render(),
                "diagnostic": diagnostic.to_dict(),
            }
            out.append((RecordKind.SKIPPED, fields))
    return out


def decision(
    ids: RecordIds,
    session: str,
    ws: workspace.Workspace,
    document: dict[str, Any],
    merged: MergedAnswer,
    hooks: int,
    view: tuple[
        ownership.AccessReport | None, transcript.Transcript | None, Mapping[SourceKind, Home]
    ],
) -> DecisionFields:
    """The record closing the event, with what the hooks saw: how they got the owner's
    access to the workspace, the transcript (when the event names one) and each HOME."""
    access, shown, homes = view
    fields: DecisionFields = {
        "conversation_id": ids["conversation_id"],
        "generation_id": ids["generation_id"],
        "event": ids["event"],
        "event_seq": ids["event_seq"],
        "session": session,
        "workspace": str(ws.root),
        "commit": ws.commit,
        "payload": document,
        "decision": merged.answer,
        "blocked_by": merged.blocked_by.hook.hook_id if merged.blocked_by else None,
        "hooks": hooks,
    }
    if access is not None:
        fields["workspace_access"] = access.to_dict()
    if shown is not None:
        fields["transcript"] = shown.to_dict()
    if homes:
        fields["homes"] = {kind.value: home.view for kind, home in sorted(homes.items())}
    return fields


def environment(
    audit: AuditWriter,
    *,
    image: str,
    image_id: str,
    built: bool,
    install: str,
    commit: str | None,
    result: ExecResult,
) -> EnvironmentFields:
    return {
        "image": image,
        "image_id": image_id,
        "built": built,
        "install": install,
        "commit": commit,
        "outcome": str(result.outcome),
        "exit_code": result.exit_code,
        "duration_ms": round(result.duration_s * 1000, 3),
        "stdout_excerpt": audit.excerpt(result.stdout),
        "stderr_excerpt": audit.excerpt(result.stderr),
        "sandbox_id": result.sandbox_id,
    }


def reaped(orphan: Orphan) -> ReapedFields:
    return {
        "container_id": orphan.container_id,
        "container_name": orphan.name,
        "owner": orphan.worker,
        "status": orphan.status,
        "reason": orphan.reason,
    }


def source_key(source: LoadedSource) -> str:
    """How the session state keys a source's last seen hash."""
    return f"{source.kind}:{source.path}"


_LIMIT_KEYS = (
    "memory", "memory_swap", "cpu_quota", "cpu_period", "pids_limit", "tmpfs", "ulimits",
    "network", "read_only_rootfs",
)  # fmt: skip


class HookRecords:
    """The `hook` records of an event, with the values many of them carry unchanged (a
    warm sandbox's attestation and limits) cleaned once."""

    def __init__(self, audit: AuditWriter) -> None:
        self.audit = audit
        #: by (field, sandbox, ...): a copy of the raw value, to compare, and its cleaned form
        self._cleaned: BoundedMemo[tuple[object, ...], tuple[Any, Cleaned]] = BoundedMemo()

    def build(
        self,
        outcome: RunOutcome,
        merged: MergedAnswer,
        ids: RecordIds,
        ws: workspace.Workspace,
        session: str,
    ) -> list[Entry]:
        out: list[Entry] = []
        for decided in merged.decisions:
            result = decided.result
            hook = result.hook
            ran = outcome.executions.get(hook.hook_id)
            fields: HookFields = {
                "conversation_id": ids["conversation_id"],
                "generation_id": ids["generation_id"],
                "event": ids["event"],
                "event_seq": ids["event_seq"],
                "session": session,
                "source": hook.source_kind.value,
                "source_file": str(hook.source_path),
                "source_hash": hook.source_sha256,
                "hook_index": hook.index,
                "command": hook.command,
                "matcher": hook.definition.matcher,
                "matched": hook.match.matched,
                "match_reason": hook.match.reason,
                "outcome": str(result.outcome),
                "reason": result.reason,
                "exit_code": result.exit_code,
                "merge_use": decided.summary,
                "merge_fields": [f.to_dict() for f in decided.fields],
                "decision": merged.answer,
                "commit": ws.commit,
            }
            passed = outcome.passed_env.get(hook.source_kind)
            if passed is not None:  # the operator's allowlist: names only, never values
                fields["passed_env"] = passed.record()
            if result.sandbox_cause is not None:
                # a failure the sandbox caused: what, the fix, and the stderr line showing it
                cause = result.sandbox_cause.to_dict()
                cause["line"] = self.audit.excerpt(cause["line"])  # redacted like stderr
                fields["sandbox_cause"] = cause
            if ran is not None:
                attestation = ran.attestation
                found = {key: attestation[key] for key in _LIMIT_KEYS if key in attestation}
                limits = {**found, "timeout_s": hook.timeout}
                fields["sandbox_id"] = ran.sandbox_id
                fields["image_digest"] = attestation.get("image_id")
                fields["runtime"] = attestation.get("runtime")
                fields["limits"] = self._once("limits", (ran.sandbox_id, hook.timeout), limits)
                fields["attestation"] = self._once("attestation", (ran.sandbox_id,), attestation)
                fields["duration_ms"] = round(ran.duration_s * 1000, 3)
                fields["stdout_excerpt"] = self.audit.excerpt(ran.stdout)
                fields["stderr_excerpt"] = self.audit.excerpt(ran.stderr)
                fields["stdout_bytes"] = len(ran.stdout)
                fields["stderr_bytes"] = len(ran.stderr)
            out.append((RecordKind.HOOK, fields))
        return out

    def _once(self, field: str, key: tuple[object, ...], value: Any) -> Cleaned:
        """`value` as the log stores it under `field`, cleaned once while it stays the same
        for `key` (a warm sandbox's hooks all carry its attestation and limits)."""
        found = self._cleaned.get((field, *key))
        if found is not None and found[0] == value:
            return found[1]
        cleaned = self.audit.cleaned(field, value)
        self._cleaned.put((field, *key), (copy.deepcopy(value), cleaned))
        return cleaned
