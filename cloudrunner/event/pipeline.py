"""One agent event from payload to answer, stage by stage, with every step recorded.

intake -> workspace (clone or adopt, access) -> writability gate -> sources -> plan ->
`received` (synced once homes and the first sandbox are prepared) -> sandbox runs (the
project hooks' in the repository's environment image, when it has one) -> merge -> session
state -> records -> answer. A stage that finds the event unfit raises `Refusal`;
this module alone records it (`refused`) and raises PayloadRefused for the CLI's error
boundary. A hook's failure is an outcome, never an exception.

No event without its records: before any hook runs, a `received` record naming the event
is written and synced; if it cannot be, no hook runs and the event fails (EventNotRecorded).
Every later record of the event carries `event_seq`, the seq of its `received` record, and
the `decision` record closes it; when that last write fails after hooks ran, the answer is
still given (it follows the hooks and the policy) and `audit verify` reports the event as
incomplete by its seq.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from cloudrunner import telemetry, workspace
from cloudrunner.audit import AuditLogError, AuditWriter, RecordKind
from cloudrunner.audit.records import Entry
from cloudrunner.egress import Egress, RunAttribution
from cloudrunner.errors import CloudrunnerError
from cloudrunner.event import hook_env, record_builders, transcript
from cloudrunner.event import intake as intake_stage
from cloudrunner.event.environments import EnvironmentImages
from cloudrunner.event.homes import Home, Homes
from cloudrunner.event.runner import SandboxSet, run_plan
from cloudrunner.event.sandboxes import SandboxProvider, SandboxRequest
from cloudrunner.event.session import (
    PersistentLoopCounterStore,
    SessionState,
    SessionStateError,
    SessionStore,
)
from cloudrunner.event.stage_errors import EventNotRecorded, PayloadRefused, Refusal
from cloudrunner.event.workspaces import Workspaces
from cloudrunner.logs import get_logger
from cloudrunner.protocol.event_names import SESSION_START
from cloudrunner.protocol.events import neutral_answer
from cloudrunner.protocol.merge import merge
from cloudrunner.protocol.plan import Plan, build_plan
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.protocol.protocol_errors import InvalidPayload
from cloudrunner.refusals import ErrorCode
from cloudrunner.replay.recording import record_event
from cloudrunner.sandbox.base import HOOK_HOME, Sandbox
from cloudrunner.settings import Settings, source_settings
from cloudrunner.sources import SourceSet, load_sources
from cloudrunner.workspace import ownership


@dataclass(frozen=True)
class EventReply:
    answer: dict[str, Any]
    gated: bool
    records: int
    #: (source, outcome) of every planned hook, for the daemon's metrics
    outcomes: tuple[tuple[str, str], ...] = ()
    #: the conversation the event belongs to ("" when the payload has none)
    conversation_id: str = ""
    #: what could not be kept after hooks ran (a record, session state), one line each;
    #: the answer is still the hooks' answer
    unrecorded: tuple[str, ...] = ()
    #: (source, allowed|refused) of each egress attempt recorded with this event
    egress: tuple[tuple[str, str], ...] = ()


class Admitted(NamedTuple):
    """An event past every refusal: where it runs, what it runs, and its session state."""

    ws: workspace.Workspace
    access: ownership.AccessReport | None
    roots_absent: bool
    sources: SourceSet
    plan: Plan
    state: SessionState


class Prepared(NamedTuple):
    """What an event's hooks need besides the plan, made while its first record syncs."""

    shown: transcript.Transcript | None
    homes: dict[SourceKind, Home]
    sandboxes: SandboxSet


class EventPipeline:
    def __init__(
        self,
        settings: Settings,
        *,
        audit: AuditWriter,
        sessions: SessionStore,
        workspaces: Workspaces,
        homes: Homes,
        environments: EnvironmentImages,
        sandboxes: SandboxProvider,
        egress: Egress,
        on_sources: Callable[[Path, SourceSet], None] | None = None,
    ) -> None:
        """`on_sources` is told each workspace's sources as an event loads them."""
        self.settings = settings
        self.profile = Profile(settings.profile)
        self.audit = audit
        self.sessions = sessions
        self.workspaces = workspaces
        self.homes = homes
        self.environments = environments
        self.sandboxes = sandboxes
        self.egress = egress
        self.on_sources = on_sources
        self.hook_records = record_builders.HookRecords(audit)
        #: the operator's allowlisted variables of this process's environment, per source
        self.passed_env = hook_env.resolve_all(settings.hook_env.entries, os.environ)

    def handle(self, payload: bytes, event: str | None = None) -> EventReply:
        try:
            intake = intake_stage.read(
                payload, event, cap=self.settings.max_payload_bytes, profile=self.profile
            )
        except Refusal as exc:
            self.refuse(exc.event or "", exc.document or {}, exc)
        telemetry.event_ids(intake.name, intake.document)
        try:
            with telemetry.span("admission"):  # workspace, gate, sources, plan, session state
                admitted = self._admit(intake)
        except Refusal as exc:
            self.refuse(intake.name, intake.document, exc)
        if isinstance(admitted, EventReply):
            return admitted
        return self._run(intake, admitted)

    def refuse(self, event: str, document: Mapping[str, Any], refusal: Refusal) -> NoReturn:
        """Record a refusal and raise PayloadRefused."""
        fields = record_builders.refused(
            event, document, refusal.message, keep_payload=refusal.keep_payload
        )
        try:
            record_builders.append(self.audit, (RecordKind.REFUSED, fields))
        except (AuditLogError, OSError) as exc:
            raise EventNotRecorded(
                f"{refusal.message}; and the refusal could not be recorded either ({exc})"
            ) from exc
        raise PayloadRefused(refusal.message, refusal.code)

    # ------------------------------------------------------------------ stages

    def _admit(self, intake: intake_stage.Intake) -> Admitted | EventReply:
        """Workspace, access and gate, sources, plan and session state; or the gated reply."""
        document, name = intake.document, intake.name
        roots_absent = self.workspaces.other_workspace(document)
        decision = self.workspaces.gate_before_clone()
        if decision is None:
            ws = self.workspaces.resolve(document)
            access = self.workspaces.grant_access(ws)
            decision = self.workspaces.gate(ws.root)
        if not decision.open:
            answer = neutral_answer(name)
            fields = record_builders.gated(intake.ids(), document, decision, answer)
            _, durable = self._append_first(name, (RecordKind.GATED, fields))
            with telemetry.span("audit.sync", {"cloudrunner.audit.records": "gated"}):
                durable()
            return EventReply(answer, gated=True, records=1, conversation_id=intake.conversation_id)
        sources = load_sources(source_settings(self.settings, ws.root, ws.trust_project_hooks))
        if self.on_sources is not None:
            self.on_sources(ws.root, sources)
        try:
            plan = build_plan(
                sources.loaded,
                name,
                intake.decoded,
                profile=self.profile,
                default_timeout=self.settings.hook_timeout,
                matcher_timeout=self.settings.matcher_timeout_ms / 1000,
            )
        except InvalidPayload as exc:
            raise Refusal(exc.message, ErrorCode.PAYLOAD_INVALID) from exc
        try:
            state = self.sessions.load(plan.conversation_id)
        except SessionStateError as exc:
            raise Refusal(exc.message, ErrorCode.SESSION_STATE_UNAVAILABLE) from exc
        return Admitted(ws, access, roots_absent, sources, plan, state)

    def _run(self, intake: intake_stage.Intake, admitted: Admitted) -> EventReply:
        """Received, hooks, merge, session state and the event's records."""
        name = intake.name
        ws, access, roots_absent, sources, plan, state = admitted
        session = plan.conversation_id or f"run-{os.getpid()}"
        hooks = [hook.hook_id for hook in plan.hooks_to_run]
        first = record_builders.received(intake.ids(), session, ws, hooks, roots_absent)
        received, durable = self._append_first(
            name, (RecordKind.RECEIVED, first), runs=bool(plan.hooks_to_run)
        )
        ids: record_builders.RecordIds = {**intake.ids(), "event_seq": received["seq"]}
        shown, homes, sandboxes = self._prepare_then_sync(
            lambda: self._prepare(plan, ws, session), durable
        )
        issued: list[str] = []  # the proxy credentials of this event's runs, ended with it
        try:
            outcome = run_plan(
                plan,
                sandboxes,
                workspace=ws.root,
                session_env=state.env,
                max_parallel=self.settings.max_parallel_hooks,
                homes={kind: HOOK_HOME for kind, home in homes.items() if home.path},
                shown=shown,
                passed_env=self.passed_env,
                hook_env=lambda hook: self.egress.hook_env(
                    hook.source_kind,
                    RunAttribution(
                        source=hook.source_kind.value,
                        event=name,
                        conversation_id=ids["conversation_id"],
                        generation_id=ids["generation_id"],
                        hook_id=hook.hook_id,
                        command=hook.command,
                        session=session,
                    ),
                    timeout_s=hook.timeout,
                    issued=issued,
                ),
            )
        finally:
            sandboxes.close()
            self.egress.end(issued)
        loops = PersistentLoopCounterStore(self.sessions)
        with telemetry.span("merge"):
            merged = merge(plan, outcome.results, loops)
        unrecorded = list(loops.problems)
        skipped = record_builders.skipped(sources, state.source_hashes, ids)
        unrecorded += self._keep_session(name, plan, state, sources, merged.env)
        used_proxy = any(
            self.egress.policy(h.source_kind) == "allowlist"
            for h in plan.hooks_to_run
            if h.hook_id in outcome.executions
        )
        egress_records = self.egress.records(used_proxy)
        closing = record_builders.decision(
            ids, session, ws, intake.document, merged, len(outcome.results), (access, shown, homes)
        )
        written: list[Entry] = [
            *skipped,
            *self.hook_records.build(outcome, merged, ids, ws, session),
            *((RecordKind.EGRESS, fields) for fields in egress_records),
            (RecordKind.DECISION, closing),
        ]
        with telemetry.span("audit.sync", {"cloudrunner.audit.records": "closing"}):
            unrecorded += self._write(name, received["seq"], written)
        for problem in unrecorded:
            # the operational log (stderr), never stdout: the agent still gets the answer
            _log.warning("worker.event_unrecorded", hook_event=name, problem=problem)
        return EventReply(
            merged.answer,
            gated=False,
            records=len(written),
            outcomes=tuple(
                (d.result.hook.source_kind.value, str(d.result.outcome)) for d in merged.decisions
            ),
            conversation_id=plan.conversation_id,
            unrecorded=tuple(unrecorded),
            egress=tuple(
                (str(f.get("source")), str(f.get("decision")))
                for f in egress_records
                if "decision" in f
            ),
        )

    # ------------------------------------------------------------------ pieces

    def _prepare(self, plan: Plan, ws: workspace.Workspace, session: str) -> Prepared:
        shown = transcript.resolve(
            plan.payload.transcript_path, state_dir=self.settings.state_dir, workspace=ws.root
        )
        homes = self.homes.prepare(ws, {hook.source_kind for hook in plan.hooks_to_run})

        def open_for(kind: SourceKind, wd: Path) -> Sandbox:
            image = self.environments.image_for(ws, session) if kind is SourceKind.PROJECT else None
            return self.sandboxes.open(
                SandboxRequest(kind, wd, ws, session, shown, homes.get(kind), image)
            )

        sandboxes = SandboxSet(open_for)
        if plan.hooks_to_run and self.sandboxes.warm:
            # the first hook's warm sandbox, borrowed while the disk syncs
            first = plan.hooks_to_run[0]
            with contextlib.suppress(Exception):  # its hook opens it again and says why
                sandboxes.get(first.source_kind, first.working_dir)
        return Prepared(shown, homes, sandboxes)

    def _keep_session(
        self,
        name: str,
        plan: Plan,
        state: SessionState,
        sources: SourceSet,
        env: Mapping[str, str],
    ) -> list[str]:
        """The sources' hashes (and a sessionStart's env) kept for the conversation; what
        could not be. Written only when it changes: the state read for this event already
        holds these hashes on almost every event (a daemon would otherwise lock, read and
        compare the file each time)."""
        hashes = {record_builders.source_key(s): s.sha256 or "" for s in sources.sources}
        if name != SESSION_START and state.source_hashes == hashes:
            return []
        try:
            with self.sessions.update(plan.conversation_id) as fresh:
                fresh.source_hashes = hashes
                if name == SESSION_START:
                    fresh.env.update(env)
        except SessionStateError as exc:
            return [exc.message]
        return []

    def _write(self, name: str, seq: int, written: list[Entry]) -> list[str]:
        try:
            self.audit.append_many(written)
        except (AuditLogError, OSError) as exc:
            return [
                f"the records of {name} (received as seq {seq}) could not be "
                f"written: {exc}; the answer stands, and `audit verify` reports the event as "
                "incomplete when its decision record is missing"
            ]
        try:
            record_event(self.settings, written)
        except (CloudrunnerError, OSError) as exc:
            return [f"the event stream could not take {name}: {exc}"]
        return []

    def _append_first(
        self, event: str, entry: Entry, *, runs: bool = True
    ) -> tuple[dict[str, Any], Callable[[], None]]:
        """Write an event's first record; the callable returned makes it durable (unless
        the operator chose fsync "never"; the sync is shared with concurrent events, see
        `group_commit`) and is called before any hook starts (see `_prepare_while`). Either
        raises EventNotRecorded when the record cannot be written or synced. When the event
        runs no hook (`runs` false) nothing waits for it to be on disk but the answer, so
        it is synced with the event's last records (one sync for the event, not two)."""
        try:
            if not runs:
                return self.audit.append(*entry, deferred=True), _nothing
            record, durability = self.audit.append_unsynced(*entry)
        except (AuditLogError, OSError) as exc:
            raise self._not_recorded(event, exc) from exc
        if durability.done:
            return record, _nothing

        def durable() -> None:
            try:
                durability.wait()
            except (AuditLogError, OSError) as exc:
                raise self._not_recorded(event, exc) from exc

        return record, durable

    @staticmethod
    def _prepare_then_sync(
        prepare: Callable[[], Prepared], durable: Callable[[], None]
    ) -> Prepared:
        """`prepare()` (the event's transcript, homes and first warm sandbox), then
        `durable()` (its first record synced), on the event's own thread: no hook starts
        before both are done. Preparing first lets the records of concurrent events gather
        for one sync (see `group_commit`); handing the preparation to another thread so it
        ran beside the sync cost a thread wake-up and a future each way, more than a warm
        preparation takes. When the sync fails, what was borrowed is given back
        and the event fails (EventNotRecorded); when the preparation fails, the record is
        still synced before its error goes on (as when the two ran side by side)."""
        try:
            prepared = prepare()
        except BaseException:
            durable()
            raise
        try:
            with telemetry.span("audit.sync", {"cloudrunner.audit.records": "received"}):
                durable()
        except BaseException:
            with contextlib.suppress(Exception):
                prepared.sandboxes.close()
            raise
        return prepared

    def _not_recorded(self, event: str, exc: Exception) -> EventNotRecorded:
        return EventNotRecorded(
            f"the {event or 'event'} event was not run: its first audit record could not "
            f"be written ({exc}); free space or fix the permissions of "
            f"{self.settings.audit_path}"
        )


_log = get_logger("cloudrunner.worker")


def _nothing() -> None:
    """Nothing to wait for."""
