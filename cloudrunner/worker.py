"""The worker: one agent event from payload to answer, with every step recorded.

event -> workspace (clone or adopt) -> writability gate -> sources (reloaded) -> plan ->
sandbox runs -> outcomes -> merge -> answer + audit records. Expected failures (a bad
payload, a non-cloud event, a missing repository) are recorded as `refused` and raised as
`CloudrunnerError`s for the CLI's error boundary; a hook's failure is an outcome, never an
exception.

No event without its records: before any hook runs, a `received` record naming the event
is written and synced; if it cannot be, no hook runs and the event fails (EventNotRecorded).
Every later record of the event carries `event_seq`, the seq of its `received` record, and
the `decision` record closes it; when that last write fails after hooks ran, the answer is
still given (it follows the hooks and the policy) and `audit verify` reports the event as
incomplete by its seq.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import fcntl
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import docker
import docker.errors

from cloudrunner import environment as project_environment
from cloudrunner import (
    gate,
    hook_home,
    ownership,
    recording,
    transcript,
    workspace,
    workspace_match,
)
from cloudrunner.audit import AuditLogError, AuditWriter, RecordKind, TornAcknowledgement
from cloudrunner.audit.pipeline import Cleaned
from cloudrunner.closing import ClosesOnExit
from cloudrunner.daemon.threads import ElasticPool
from cloudrunner.egress.credentials import RunAttribution
from cloudrunner.egress.manager import Egress
from cloudrunner.errors import CloudrunnerError
from cloudrunner.memo import BoundedMemo
from cloudrunner.protocol.errors import EventNotAvailable, InvalidPayload, UnknownEvent
from cloudrunner.protocol.events import (
    MAX_PAYLOAD_DEPTH,
    event_spec,
    neutral_answer,
    payload_problem,
)
from cloudrunner.protocol.merge import MergedAnswer, merge
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.plan import build_plan
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.runner import RunOutcome, SandboxSet, run_plan
from cloudrunner.sandbox import agent_files, reaper
from cloudrunner.sandbox.base import (
    HOOK_HOME,
    ExecRequest,
    Sandbox,
    SandboxConfigError,
    SandboxLabels,
    SandboxSpec,
)
from cloudrunner.sandbox.engine import EngineLink
from cloudrunner.sandbox.factory import open_sandbox
from cloudrunner.sandbox.limits import SandboxProfile, machine_cores, session_quota
from cloudrunner.sandbox.plan import identity_for
from cloudrunner.sandbox.session_pool import SessionPool
from cloudrunner.session import PersistentLoopCounterStore, SessionStateError, SessionStore
from cloudrunner.settings import Settings
from cloudrunner.source_settings import source_settings
from cloudrunner.sources import (
    LoadedSource,
    SourceSet,
    SourceSettings,
    SourceStatus,
    load_sources,
)


class PayloadRefused(CloudrunnerError):
    """The event was refused before any hook ran (recorded in the audit log).

    `code` is stable (the daemon's API answers with it): payload-too-large,
    payload-not-json, payload-invalid, event-missing, unknown-event, event-not-in-cloud,
    workspace-unavailable, workspace-mismatch.
    """

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


#: the exit code of `run` when the audit log cannot take an event's first record
#: (sysexits' EX_IOERR)
AUDIT_UNWRITABLE_EXIT = 74


class EventNotRecorded(PayloadRefused):
    """The event's first record could not be written (disk full, I/O error, permission), so
    no hook ran; code `audit-unwritable`. Unlike other refusals it is *not* in the log."""

    exit_code = AUDIT_UNWRITABLE_EXIT

    def __init__(self, message: str) -> None:
        super().__init__(message, "audit-unwritable")


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


def _inside(path: Path, root: Path) -> bool:
    if path == root:  # the project source's hooks, on every event: no need to resolve
        return True
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


class Worker(ClosesOnExit):
    """Answers events for one settings object; `close()` releases the audit log."""

    def __init__(
        self,
        settings: Settings,
        *,
        client: docker.DockerClient | EngineLink | None = None,
        audit: AuditWriter | None = None,
        pool: SessionPool | None = None,
        gate_dir: Path | None = None,
        reap: bool = True,
        home_root: Path | None = None,
        egress: Egress | None = None,
        on_sources: Callable[[Path, SourceSet], None] | None = None,
    ) -> None:
        """`audit`, `pool` and `client` are shared when given (the daemon runs one worker per
        workspace over one audit log, one engine connection and one warm-sandbox pool) and
        are then not closed by `close()`; `gate_dir` holds this worker's gate state
        (default: the state directory); `reap` removes orphaned sandboxes on the first
        engine connection (the daemon does that once, at start); `home_root` holds the
        hooks' homes (default: <state_dir>/homes); `egress` is shared like `audit` (one
        proxy, one access-log reader per process, so each attempt is recorded once);
        `on_sources` is told each workspace's sources as an event loads them (the daemon's
        fail policy)."""
        self.on_sources = on_sources
        self.settings = settings
        self.worker_id = settings.effective_worker_id
        self.profile = Profile(settings.profile)
        self.sessions = SessionStore(settings.state_dir)
        self.gate_dir = gate_dir or settings.state_dir
        self._link = client if isinstance(client, EngineLink) else EngineLink(client)
        self._reaped = not reap
        self._pool = pool
        self._workspaces: dict[str, workspace.Workspace] = {}
        self._environment_images: dict[tuple[str, str, str], str] = {}
        #: workspaces a probe found writable, with the gate generation it was under
        self._writable: dict[Path, int] = {}
        #: how hooks got the owner's access to each workspace (once per worker)
        self._access: dict[Path, ownership.AccessReport] = {}
        self.home_root = home_root or settings.state_dir / "homes"
        #: each home's last preparation (monotonic time, the directory's inode, its result):
        #: within home.measure_interval_s it is not made, written or measured again
        self._homes_ready: dict[Path, tuple[float, int, _Home]] = {}
        self._home_dirs: dict[tuple[Path, SourceKind], Path] = {}
        #: values many hook records carry unchanged (a warm sandbox's attestation and
        #: limits), by (field, sandbox, ...): a copy of the raw value, to compare, and its
        #: cleaned form
        self._cleaned: BoundedMemo[tuple[object, ...], tuple[Any, Cleaned]] = BoundedMemo()
        #: the effective sandbox profile of each source kind (settings do not change under
        #: a worker; `profile_for` validates a pydantic model per call)
        self._profiles: dict[str, SandboxProfile] = {}
        #: each source's profile as its sandbox gets it, by (kind, network, image)
        self._open_profiles: dict[tuple[str, str | None, str | None], SandboxProfile] = {}
        #: threads that prepare an event while its first record syncs (a long-lived worker's;
        #: a thread starts on first need and leaves when idle)
        self._helpers = (
            ElasticPool(settings.server.max_concurrent_events, name="cloudrunner-prepare")
            if pool is not None
            else None
        )
        self._owns_audit = audit is None
        self.audit = audit or open_audit(settings)
        self.egress = egress or open_egress(settings, self._link)

    def close(self) -> None:
        if self._helpers is not None:
            self._helpers.shutdown(wait=False)
        if self._owns_audit:
            self.audit.close()

    # ------------------------------------------------------------------ the event path

    def handle(self, payload: bytes, event: str | None = None) -> EventReply:
        document = self._document(payload, event)
        name = event or str(document.get("hook_event_name") or "")
        if not name:
            self._refuse(
                "",
                document,
                "the payload has no hook_event_name; pass --event NAME",
                "event-missing",
            )
        ids: dict[str, Any] = {
            "conversation_id": str(document.get("conversation_id") or ""),
            "generation_id": str(document.get("generation_id") or ""),
            "event": name,
        }
        try:
            spec = event_spec(name)
            if not self.profile.runs_event(spec.in_cloud):
                raise EventNotAvailable(name, str(self.profile), spec.not_in_cloud_reason or "")
        except UnknownEvent as exc:
            self._refuse(name, document, exc.message, "unknown-event")
        except EventNotAvailable as exc:
            self._refuse(name, document, exc.message, "event-not-in-cloud")
        roots_absent = self._refuse_other_workspace(document, ids)
        decision = self._gate_before_clone()
        if decision is None:
            ws = self._current(self._resolve_workspace(document, ids))
            access = self._grant_access(ws, document, ids)
            decision = self._gate(ws.root)
        if not decision.open:
            answer = neutral_answer(name)
            _, durable = self._append_first(
                name,
                RecordKind.GATED,
                {
                    **ids,
                    "session": ids["conversation_id"],
                    "payload": document,
                    "reason": decision.reason,
                    "gate": {"mode": str(decision.mode), "generation": decision.generation},
                    "decision": answer,
                },
            )
            durable()
            return EventReply(answer, gated=True, records=1, conversation_id=ids["conversation_id"])
        sources = load_sources(self._source_settings(ws.root, ws.trust_project_hooks))
        if self.on_sources is not None:
            self.on_sources(ws.root, sources)
        try:
            plan = build_plan(
                sources.loaded,
                name,
                payload,
                profile=self.profile,
                default_timeout=self.settings.hook_timeout,
                matcher_timeout=self.settings.matcher_timeout_ms / 1000,
            )
        except InvalidPayload as exc:
            self._refuse(name, document, exc.message, "payload-invalid")
        try:
            state = self.sessions.load(plan.conversation_id)
        except SessionStateError as exc:
            self._refuse(name, document, exc.message, "session-state-unavailable")
        session_label = plan.conversation_id or f"run-{os.getpid()}"
        received, durable = self._append_first(
            name,
            RecordKind.RECEIVED,
            {
                **ids,
                "session": session_label,
                "workspace": str(ws.root),
                "commit": ws.commit,
                "hooks": [hook.hook_id for hook in plan.hooks_to_run],
                **({"workspace_roots_absent": True} if roots_absent else {}),
            },
            runs=bool(plan.hooks_to_run),
        )
        ids["event_seq"] = received["seq"]

        def prepare() -> _Prepared:
            shown = transcript.resolve(
                plan.payload.transcript_path, state_dir=self.settings.state_dir, workspace=ws.root
            )
            homes = self._homes(ws, {hook.source_kind for hook in plan.hooks_to_run})
            sandboxes = SandboxSet(
                lambda kind, wd: self._open(kind, wd, ws, session_label, shown=shown, homes=homes)
            )
            if plan.hooks_to_run and self._pool is not None:
                # the first hook's warm sandbox, borrowed while the disk syncs
                first = plan.hooks_to_run[0]
                with contextlib.suppress(Exception):  # its hook opens it again and says why
                    sandboxes.get(first.source_kind, first.working_dir)
            return _Prepared(shown, homes, sandboxes)

        shown, homes, sandboxes = self._prepare_while(prepare, durable)
        issued: list[str] = []  # the proxy credentials of this event's runs, ended with it
        try:
            outcome = run_plan(
                plan,
                sandboxes,
                workspace=ws.root,
                session_env=state.env,
                max_parallel=self.settings.max_parallel_hooks,
                homes={kind: HOOK_HOME for kind, home in homes.items() if home.path},
                hook_env=lambda hook: self.egress.hook_env(
                    str(hook.source_kind),
                    RunAttribution(
                        source=str(hook.source_kind),
                        event=name,
                        conversation_id=ids["conversation_id"],
                        generation_id=ids["generation_id"],
                        hook_id=hook.hook_id,
                        command=hook.command,
                        session=session_label,
                    ),
                    timeout_s=hook.timeout,
                    issued=issued,
                ),
            )
        finally:
            sandboxes.close()
            self.egress.end(issued)
        loops = PersistentLoopCounterStore(self.sessions)
        merged = merge(plan, outcome.results, loops)
        unrecorded = list(loops.problems)
        skipped = self._source_records(sources, state.source_hashes, ids)
        hashes = {_source_key(s): s.sha256 or "" for s in sources.sources}
        # Written only when it changes: the state read for this event already holds these
        # hashes on almost every event (a daemon would otherwise lock, read and compare the
        # file each time).
        if name == "sessionStart" or state.source_hashes != hashes:
            try:
                with self.sessions.update(plan.conversation_id) as fresh:
                    fresh.source_hashes = hashes
                    if name == "sessionStart":
                        fresh.env.update(merged.env)
            except SessionStateError as exc:
                unrecorded.append(exc.message)
        used_proxy = any(
            self.egress.policy(str(h.source_kind)) == "allowlist"
            for h in plan.hooks_to_run
            if h.hook_id in outcome.executions
        )
        egress_records = self.egress.records(used_proxy)
        records = [
            *skipped,
            *self._hook_records(outcome, merged, ids, ws, session_label),
            *((RecordKind.EGRESS, fields) for fields in egress_records),
            (
                RecordKind.DECISION,
                {
                    **ids,
                    "session": session_label,
                    "workspace": str(ws.root),
                    "commit": ws.commit,
                    "payload": document,
                    "decision": merged.answer,
                    "blocked_by": merged.blocked_by.hook.hook_id if merged.blocked_by else None,
                    "hooks": len(outcome.results),
                    **_sandbox_view(access, shown, homes),
                },
            ),
        ]
        try:
            self.audit.append_many(records)
        except (AuditLogError, OSError) as exc:
            unrecorded.append(
                f"the records of {name} (received as seq {received['seq']}) could not be "
                f"written: {exc}; the answer stands, and `audit verify` reports the event as "
                "incomplete when its decision record is missing"
            )
        else:
            try:
                recording.record_event(self.settings, records)
            except (CloudrunnerError, OSError) as exc:
                unrecorded.append(f"the event stream could not take {name}: {exc}")
        for problem in unrecorded:
            # stderr, never stdout: the agent still gets the hooks' answer
            print(f"cloudrunner: warning: {problem}", file=sys.stderr, flush=True)
        return EventReply(
            merged.answer,
            gated=False,
            records=len(records),
            outcomes=tuple(
                (str(d.result.hook.source_kind), str(d.result.outcome)) for d in merged.decisions
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

    def _source_settings(self, root: Path | None, trusted: bool) -> SourceSettings:
        return source_settings(self.settings, root, trusted)

    def startup_sources(self) -> tuple[Path | None, SourceSet]:
        """The sources this worker serves before any event names a workspace (for the fail
        policy the daemon publishes at start): the configured workspace's, when it is a
        checkout already there (`--workspace`, or a `--repo` clone made before), else the
        operator's sources alone. Nothing is cloned and nothing recorded."""
        cfg = self.settings.workspace
        path = self._clone_dest() if cfg.repo else cfg.path
        root: Path | None = None
        trusted = True
        if path is not None and path.is_absolute() and (not cfg.repo or (path / ".git").exists()):
            try:
                ws = workspace.adopt(
                    path, trust_project_hooks=self.settings.sources.trust_project_hooks
                )
            except CloudrunnerError:
                pass  # the first event says what is wrong with it
            else:
                root, trusted = ws.root, ws.trust_project_hooks
        return root, load_sources(self._source_settings(root, trusted))

    def _append_first(
        self, event: str, kind: RecordKind, fields: Mapping[str, Any], *, runs: bool = True
    ) -> tuple[dict[str, Any], Callable[[], None]]:
        """Write an event's first record; the callable returned makes it durable (unless
        the operator chose fsync "never"; the sync is shared with concurrent events, see
        `group_commit`) and is called before any hook starts (see `_prepare_while`). Either
        raises EventNotRecorded when the record cannot be written or synced. When the event
        runs no hook (`runs` false) nothing waits for it to be on disk but the answer, so
        it is synced with the event's last records (one sync for the event, not two)."""
        try:
            if not runs:
                return self.audit.append(kind, fields, deferred=True), _nothing
            record, durability = self.audit.append_unsynced(kind, fields)
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

    def _prepare_while(
        self, prepare: Callable[[], _Prepared], durable: Callable[[], None]
    ) -> _Prepared:
        """`durable()` (the event's first record synced) and `prepare()` (its transcript,
        homes and first sandbox) side by side in a long-lived worker: the preparation runs
        on a helper thread while this one waits for the disk without holding the GIL, so
        what the sync costs the event is the longer of the two, not their sum. No hook
        starts before both are done; when the sync fails, what was borrowed is given back
        and the event fails (EventNotRecorded)."""
        if durable is _nothing or self._helpers is None:
            durable()
            return prepare()
        future = self._helpers.submit(prepare)
        try:
            durable()
        except BaseException:
            with contextlib.suppress(Exception):
                future.result().sandboxes.close()
            raise
        return future.result()

    def _not_recorded(self, event: str, exc: Exception) -> EventNotRecorded:
        return EventNotRecorded(
            f"the {event or 'event'} event was not run: its first audit record could not "
            f"be written ({exc}); free space or fix the permissions of "
            f"{self.settings.audit_path}"
        )

    def _gate(self, root: Path) -> gate.GateDecision:
        """The gate's decision; once a probe found `root` writable, it is not probed again
        while the gate's generation stays the same (see gate.evaluate). The probe writes as
        the project hooks' uid, as they would."""
        seen = self._writable.get(root)
        as_user = self._probe_user(root)
        decision = gate.evaluate(
            root, self.gate_dir, known_writable=seen is not None, as_user=as_user
        )
        if seen is not None and seen != decision.generation:
            # the gate was set again meanwhile: probe afresh under the new state
            del self._writable[root]
            decision = gate.evaluate(root, self.gate_dir, as_user=as_user)
        if decision.open and decision.probe is not None and decision.probe.writable:
            self._writable[root] = decision.generation
        return decision

    def _probe_user(self, root: Path) -> tuple[int, int] | None:
        try:
            return identity_for(self._profile_for("project"), root)
        except CloudrunnerError:
            return None  # the probe then says the workspace cannot be read

    def _profile_for(self, kind: str) -> SandboxProfile:
        found = self._profiles.get(kind)
        if found is None:
            found = self._profiles[kind] = self.settings.sandbox.profile_for(kind)
        return found

    def _hook_uids(self, root: Path) -> set[int]:
        """Every uid hooks of a source may run as in `root` (profiles may differ per source)."""
        uids = set()
        for kind in SourceKind:
            with contextlib.suppress(CloudrunnerError):
                uids.add(identity_for(self._profile_for(str(kind)), root)[0])
        return uids

    def _grant_access(
        self, ws: workspace.Workspace, document: Mapping[str, Any], ids: Mapping[str, str]
    ) -> ownership.AccessReport | None:
        """Give the hook uids the owner's access to the workspace (POSIX ACLs; see
        `ownership`), once per worker; not while the gate is held closed (nothing may touch
        the workspace then), and again while the workspace was read-only. A workspace that
        cannot be granted is refused with the fix named."""
        done = self._access.get(ws.root)
        if done is not None:
            return done
        try:
            if gate.read_state(self.gate_dir).mode is gate.GateMode.CLOSED:
                return None
            report = ownership.grant_workspace(ws.root, self._hook_uids(ws.root))
        except CloudrunnerError as exc:
            self._refuse(ids["event"], document, exc.message, "workspace-unavailable")
        if report.mechanism != "deferred":
            self._access[ws.root] = report
        return report

    def _homes(self, ws: workspace.Workspace, kinds: set[SourceKind]) -> dict[SourceKind, _Home]:
        """Each source's HOME, made and measured before its hooks run (see `hook_home`)."""
        if not self.settings.home.enabled:
            return {}
        settings = self.settings.home
        out: dict[SourceKind, _Home] = {}
        now = time.monotonic()
        for kind in kinds:
            path = self._home_dirs.get((ws.root, kind))
            if path is None:
                path = hook_home.home_dir(self.home_root, ws.root, str(kind))
                self._home_dirs[(ws.root, kind)] = path
            ready = self._homes_ready.get(path)
            if ready is not None and now - ready[0] < settings.measure_interval_s:
                # prepared a moment ago: the same directory (not removed and made anew)
                # needs no mkdir, .gitconfig or measuring yet
                try:
                    same = os.lstat(path).st_ino == ready[1]
                except OSError:
                    same = False
                if same:
                    out[kind] = ready[2]
                    continue
            try:
                uid, gid = identity_for(self._profile_for(str(kind)), ws.root)
                status = hook_home.prepare(
                    path, uid, gid, workspace=ws.root, limit=settings.max_bytes,
                    git_name=settings.git_user_name, git_email=settings.git_user_email,
                )  # fmt: skip
            except hook_home.HomeUnavailable as exc:
                # hooks keep the image's HOME, and the record says why
                out[kind] = _Home(None, {"path": None, "reason": exc.message})
                continue
            except CloudrunnerError as exc:
                out[kind] = _Home(path, {"path": str(path), "error": exc.message}, exc)
                continue
            out[kind] = home = _Home(path, status.to_dict())
            with contextlib.suppress(OSError):
                self._homes_ready[path] = (now, os.lstat(path).st_ino, home)
        return out

    def _document(self, payload: bytes, event: str | None) -> dict[str, Any]:
        cap = self.settings.max_payload_bytes
        if len(payload) > cap:
            self._refuse(
                event or "",
                {},
                f"the payload is {len(payload)} bytes, over the {cap}-byte cap "
                "(max_payload_bytes in the settings)",
                "payload-too-large",
            )
        try:
            document: Any = json.loads(payload.decode("utf-8"))
        except RecursionError:
            self._refuse(
                event or "",
                {},
                "the payload cannot be kept as sent: nested deeper than "
                f"{MAX_PAYLOAD_DEPTH} levels; send a flatter payload",
                "payload-unencodable",
            )
        except (UnicodeDecodeError, ValueError) as exc:
            self._refuse(
                event or "", {}, f"the payload is not a JSON document ({exc})", "payload-not-json"
            )
        if not isinstance(document, dict):
            self._refuse(
                event or "",
                {},
                f"the payload must be a JSON object, not {type(document).__name__}",
                "payload-not-json",
            )
        problem = payload_problem(document)
        if problem is not None:
            # the refused record keeps only what is safe to encode, never the payload
            self._refuse(
                event or _safe_text(document.get("hook_event_name")),
                document,
                f"the payload cannot be kept as sent: {problem}",
                "payload-unencodable",
                keep_payload=False,
            )
        return dict(document)

    def refuse(self, event: str, reason: str, code: str) -> NoReturn:
        """Record a `refused` event whose payload was never read, and raise PayloadRefused."""
        self._refuse(event, {}, reason, code)

    def workspaces(self) -> list[workspace.Workspace]:
        """The checkouts this worker has resolved so far."""
        return list(self._workspaces.values())

    def _refuse(
        self,
        event: str,
        document: Mapping[str, Any],
        reason: str,
        code: str,
        *,
        keep_payload: bool = True,
    ) -> NoReturn:
        """Record a refusal and raise; `keep_payload` False for a payload that cannot be
        encoded (its ids are kept escaped, the payload itself not at all)."""
        fields = {
            "event": _safe_text(event),
            "conversation_id": _safe_text(document.get("conversation_id")),
            "generation_id": _safe_text(document.get("generation_id")),
            "payload": dict(document) if keep_payload else {},
            "reason": reason,
        }
        try:
            self.audit.append(RecordKind.REFUSED, fields)
        except (AuditLogError, OSError) as exc:
            raise EventNotRecorded(
                f"{reason}; and the refusal could not be recorded either ({exc})"
            ) from exc
        raise PayloadRefused(reason, code)

    def _configured_root(self) -> Path | None:
        """The directory a worker with a configured workspace serves (None without one)."""
        cfg = self.settings.workspace
        return self._clone_dest() if cfg.repo else cfg.path

    def _refuse_other_workspace(self, document: Mapping[str, Any], ids: Mapping[str, Any]) -> bool:
        """Refuse an event naming another workspace than the configured one (hooks act on
        the agent's tree only); True when the payload names none (see workspace_match)."""
        configured = self._configured_root()
        if configured is None or not configured.is_absolute():
            return False  # a relative --workspace is refused when it is resolved
        check = workspace_match.check_roots(configured, document.get("workspace_roots"))
        if check.code is not None:
            self._refuse(ids["event"], document, check.reason, check.code)
        return check.absent

    def _gate_before_clone(self) -> gate.GateDecision | None:
        """With --repo and --workspace DIR, DIR not cloned yet and not writable: the held
        gate's decision on DIR (nothing is cloned until it is writable), else None."""
        cfg = self.settings.workspace
        dest = cfg.path
        if not cfg.repo or dest is None or not dest.is_absolute() or "" in self._workspaces:
            return None
        with _locked(self._clone_lock(dest)):  # not while another thread clones into it
            if not dest.is_dir() or (dest / ".git").exists():
                return None
            decision = self._gate(dest)
        return None if decision.open else decision

    def _clone_lock(self, dest: Path) -> Path:
        """The lock of a clone into `dest`, in the state directory: DIR's parent may be
        read-only (a volume mounted at /workspace in a container with a read-only root)."""
        digest = hashlib.sha256(str(dest).encode()).hexdigest()[:16]
        return self.settings.clone_dir / f".{digest}.lock"

    def _resolve_workspace(
        self, document: Mapping[str, Any], ids: Mapping[str, Any]
    ) -> workspace.Workspace:
        # One checkout per configured workspace; without one, per payload workspace root
        # (a daemon's default worker serves many conversations in different checkouts).
        cfg = self.settings.workspace
        roots = document.get("workspace_roots")
        key = "" if cfg.repo or cfg.path is not None else json.dumps(roots, default=str)
        found = self._workspaces.get(key)
        if found is not None:
            try:
                workspace.check_unchanged(found.root)
            except CloudrunnerError as exc:
                self._refuse(ids["event"], document, exc.message, "workspace-unavailable")
            return found
        try:
            ws = self._checkout(document)
        except CloudrunnerError as exc:
            self._refuse(ids["event"], document, exc.message, "workspace-unavailable")
        self._workspaces[key] = ws
        return ws

    def _current(self, ws: workspace.Workspace) -> workspace.Workspace:
        """`ws` with the commit checked out now (a long-lived worker outlives commits)."""
        commit = workspace.head_commit(ws)
        return ws if commit == ws.commit else dataclasses.replace(ws, commit=commit)

    def _checkout(self, document: Mapping[str, Any]) -> workspace.Workspace:
        cfg = self.settings.workspace
        trust = self.settings.sources.trust_project_hooks
        if cfg.path is not None and not cfg.path.is_absolute():
            raise workspace.WorkspaceError(
                f"the workspace path {str(cfg.path)!r} (--workspace, workspace.path) is "
                f'relative; give an absolute path (for example --workspace "$PWD/{cfg.path}")'
            )
        if cfg.repo:
            dest = self._clone_dest()
            with _locked(self._clone_lock(dest)):
                if (dest / ".git").exists():
                    return workspace.adopt(dest, trust_project_hooks=trust)
                credentials = workspace.Credentials(
                    token_env=None if cfg.credential_file else cfg.credential_env,
                    token_file=cfg.credential_file,
                    username=cfg.credential_username,
                    ssh_key_file=cfg.ssh_key_file,
                    require_token=cfg.credential_file is not None,
                )
                ws = workspace.clone(
                    cfg.repo,
                    dest,
                    ref=cfg.ref or None,
                    shallow=cfg.shallow,
                    credentials=credentials,
                    trust_project_hooks=trust,
                )
                self._hand_over(dest)
                return ws
        if cfg.path is not None:
            return workspace.adopt(cfg.path, trust_project_hooks=trust)
        roots = document.get("workspace_roots")
        if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0]:
            if not Path(roots[0]).is_absolute():
                raise workspace.WorkspaceError(
                    f"the payload's workspace_roots[0] {roots[0]!r} is a relative path; "
                    "the agent must send the workspace's absolute path"
                )
            return workspace.adopt(Path(roots[0]), trust_project_hooks=trust)
        raise workspace.WorkspaceError(
            "no workspace: give --workspace DIR, --repo URL, or workspace_roots in the payload"
        )

    def _clone_dest(self) -> Path:
        """Where the configured repository is cloned."""
        cfg = self.settings.workspace
        key = hashlib.sha256(f"{cfg.repo}\n{cfg.ref}".encode()).hexdigest()[:16]
        return cfg.path or self.settings.clone_dir / key

    def _hand_over(self, root: Path) -> None:
        """A clone this worker made as root belongs to the unprivileged hook uid, so hooks
        (which never run as uid 0) can write the workspace they act on, under every
        runtime (gVisor ignores the host's ACLs). Nothing else owns a fresh clone and no
        hook has run in it yet. Adopted checkouts keep their owner (see `ownership`)."""
        if os.geteuid() != 0:
            return
        uid, gid = identity_for(self._profile_for("project"), root)
        for directory, dirs, files in os.walk(root):
            os.lchown(directory, uid, gid)
            for entry in (*dirs, *files):
                os.lchown(os.path.join(directory, entry), uid, gid)

    def _environment_image(self, ws: workspace.Workspace, session: str) -> str | None:
        """The image of the repository's .cursor/environment.json (built, and its `install`
        run once per image and commit), or None to use the configured image.

        Called when the first project hook of an event needs its sandbox, so a failure
        here is that hook's sandbox_error (a block for failClosed hooks), not the worker's.
        """
        if not self.settings.workspace.use_environment_json:
            return None
        env = project_environment.load_environment(ws.root)
        if env is None or not env.has_build:
            return None
        # A long-lived worker asks the engine once per environment file and commit (an
        # uncommitted change to the build context is picked up at the next commit).
        key = (str(ws.root), ws.commit or "", env.sha256)
        if key in self._environment_images:
            return self._environment_images[key]
        built = project_environment.build_image(
            self._engine(), env, labels={"cloudrunner.worker": self.worker_id}
        )
        if env.install:
            self._install_once(ws, env.install, built, session)
        self._environment_images[key] = built.tag
        return built.tag

    def _install_once(
        self,
        ws: workspace.Workspace,
        install: str,
        built: project_environment.EnvironmentImage,
        session: str,
    ) -> None:
        marker_dir = self.settings.state_dir / "environments"
        marker = marker_dir / f"{built.key[:24]}-{(ws.commit or 'no-commit')[:12]}.installed"
        with _locked(marker_dir / ".install.lock"):
            if marker.exists():
                return
            profile = self._profile_for("project").model_copy(
                update={"image": built.tag, "isolation": "hook"}
            )
            spec = SandboxSpec(
                workspace=ws.root,
                labels=SandboxLabels(worker=self.worker_id, session=session, source="install"),
                profile=profile,
            )
            with open_sandbox(spec, self._engine()) as sandbox:
                result = sandbox.run(
                    ExecRequest(
                        command=install,
                        cwd=str(ws.root),
                        env={"CURSOR_PROJECT_DIR": str(ws.root), "CURSOR_CODE_REMOTE": "true"},
                        timeout_s=self.settings.workspace.install_timeout,
                    )
                )
            fields = {
                "image": built.tag,
                "image_id": built.image_id,
                "built": built.built,
                "install": install,
                "commit": ws.commit,
                "outcome": str(result.outcome),
                "exit_code": result.exit_code,
                "duration_ms": round(result.duration_s * 1000, 3),
                "stdout_excerpt": self.audit.excerpt(result.stdout),
                "stderr_excerpt": self.audit.excerpt(result.stderr),
                "sandbox_id": result.sandbox_id,
            }
            self.audit.append(RecordKind.ENVIRONMENT, fields)
            if result.outcome is not Outcome.OK:
                tail = result.stderr.decode(errors="replace").strip()[-300:]
                raise project_environment.EnvironmentBuildError(
                    f"the install command of {ws.environment_file} failed "
                    f"({result.outcome}, exit {result.exit_code}: {result.message or tail}); "
                    "project hooks cannot run in that environment until it is fixed"
                )
            marker.write_text(f"{built.image_id}\n{ws.commit}\n")

    def _engine(self) -> docker.DockerClient:
        client = self._link.client()
        if not self._reaped:
            self._reaped = True
            self._reap(client)
        return client

    def _reap(self, client: docker.DockerClient) -> None:
        """On start: remove sandbox containers that a worker process which is gone left
        behind (a crash, a SIGKILL), and record what was removed."""
        reap_orphans(client, self.worker_id, self.audit)

    def _open(
        self,
        kind: SourceKind,
        working_dir: Path,
        ws: workspace.Workspace,
        session: str,
        *,
        shown: transcript.Transcript | None = None,
        homes: Mapping[SourceKind, _Home] | None = None,
    ) -> Sandbox:
        network = self.egress.network_for(str(kind), session)
        image = self._environment_image(ws, session) if kind is SourceKind.PROJECT else None
        profile = self._sandbox_profile(str(kind), network, image)
        uid, gid = identity_for(profile, ws.root)
        access = self._access.get(ws.root)
        if (
            profile.runtime == "runsc"
            and profile.workspace_mode == "rw"
            and access is not None
            and access.mechanism == "acl"
            and uid in access.uids
        ):
            raise SandboxConfigError(
                f"gVisor (runtime runsc) does not apply the host's POSIX ACLs, so {kind} hooks "
                f"(uid {uid}) cannot write the workspace {ws.root}, which belongs to uid "
                f"{access.owner}; run them with runtime runc, hand the checkout to them "
                f"(chown -R {uid}:{gid} {ws.root}), or set sandbox.user to the owner's uid "
                "when it is not 0"
            )
        prepared = (homes or {}).get(kind)
        if prepared is not None and prepared.error is not None:
            raise prepared.error  # over its size limit: this source's hooks do not run
        home = prepared.path if prepared is not None else None
        config_dirs = () if _inside(working_dir, ws.root) else (working_dir,)
        # The state directory is where the engine sees it, the package may not be (a worker
        # in a container), so session agents mount their files from a staged copy there.
        agent_dir = (
            agent_files.stage(self.settings.state_dir) if profile.isolation == "session" else None
        )
        spec = SandboxSpec(
            workspace=ws.root,
            labels=SandboxLabels(worker=self.worker_id, session=session, source=str(kind)),
            profile=profile,
            config_dirs=config_dirs,
            agent_dir=agent_dir,
            home=home,
            transcript=shown.mount if shown is not None else None,
            on_start=self.egress.bind if network is not None else None,
        )
        if self._pool is not None and profile.isolation == "session":
            return self._pool.borrow(spec)
        self._engine()  # connects (and reaps, the first time), or fails this hook
        return open_sandbox(spec, self._link)

    def _sandbox_profile(self, kind: str, network: str | None, image: str | None) -> SandboxProfile:
        """The profile a source's sandbox gets: its own, with the egress network, the
        repository's environment image and the session quota applied (made once per
        combination: model copies cost more than the rest of opening a warm sandbox)."""
        key = (kind, network, image)
        found = self._open_profiles.get(key)
        if found is not None:
            return found
        profile = self._profile_for(kind)
        if network is not None:
            profile = profile.model_copy(update={"network": network})
        if image is not None:
            profile = profile.model_copy(update={"image": image})
        if profile.isolation == "session":
            # a session container's hooks share its quota: enough for the parallel ones
            limits = profile.limits
            cpus = session_quota(
                limits.cpus, self.settings.max_parallel_hooks, machine_cores(),
                limits.session_cpus,
            )  # fmt: skip
            wider = limits.model_copy(update={"cpus": cpus})
            profile = profile.model_copy(update={"limits": wider})
        self._open_profiles[key] = profile
        return profile

    def _source_records(
        self,
        sources: SourceSet,
        seen: Mapping[str, str],
        ids: Mapping[str, Any],
    ) -> list[tuple[RecordKind, dict[str, Any]]]:
        """One `skipped` record per diagnostic of a source the conversation has not seen in
        this version yet (a skipped user source, a prompt hook, a broken file, ...)."""
        out: list[tuple[RecordKind, dict[str, Any]]] = []
        for source in sources.sources:
            # A broken source is reported on every event (its hooks did not run); anything
            # else once per conversation and file version.
            unseen = seen.get(_source_key(source)) != (source.sha256 or "")
            if source.status is not SourceStatus.BROKEN and not unseen:
                continue
            for diagnostic in source.diagnostics:
                # a missing file the operator configured (an error) is recorded
                if diagnostic.code == "source-absent" and diagnostic.severity != "error":
                    continue
                out.append(
                    (
                        RecordKind.SKIPPED,
                        {
                            **ids,
                            "source": str(source.kind),
                            "source_file": str(source.path) if source.path else None,
                            "source_hash": source.sha256,
                            "source_status": str(source.status),
                            "reason": diagnostic.render(),
                            "diagnostic": diagnostic.to_dict(),
                        },
                    )
                )
        return out

    def _cleaned_once(self, field: str, key: tuple[object, ...], value: Any) -> Cleaned:
        """`value` as the log stores it under `field`, cleaned once while it stays the same
        for `key` (a warm sandbox's hooks all carry its attestation and limits)."""
        found = self._cleaned.get((field, *key))
        if found is not None and found[0] == value:
            return found[1]
        cleaned = self.audit.cleaned(field, value)
        self._cleaned.put((field, *key), (copy.deepcopy(value), cleaned))
        return cleaned

    def _hook_records(
        self,
        outcome: RunOutcome,
        merged: MergedAnswer,
        ids: Mapping[str, Any],
        ws: workspace.Workspace,
        session: str,
    ) -> list[tuple[RecordKind, dict[str, Any]]]:
        out: list[tuple[RecordKind, dict[str, Any]]] = []
        for decision in merged.decisions:
            result = decision.result
            hook = result.hook
            ran = outcome.executions.get(hook.hook_id)
            attestation = ran.attestation if ran is not None else {}
            fields: dict[str, Any] = {
                **ids,
                "session": session,
                "source": str(hook.source_kind),
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
                "merge_use": decision.summary,
                "merge_fields": [f.to_dict() for f in decision.fields],
                "decision": merged.answer,
                "commit": ws.commit,
            }
            if result.sandbox_cause is not None:
                # a failure the sandbox caused: what, the fix, and the stderr line showing it
                cause = result.sandbox_cause.to_dict()
                cause["line"] = self.audit.excerpt(cause["line"])  # redacted like stderr
                fields["sandbox_cause"] = cause
            if ran is not None:
                fields.update(
                    sandbox_id=ran.sandbox_id,
                    image_digest=attestation.get("image_id"),
                    runtime=attestation.get("runtime"),
                    limits=self._cleaned_once(
                        "limits",
                        (ran.sandbox_id, hook.timeout),
                        _attested_limits(attestation, hook.timeout),
                    ),
                    attestation=self._cleaned_once("attestation", (ran.sandbox_id,), attestation),
                    duration_ms=round(ran.duration_s * 1000, 3),
                    stdout_excerpt=self.audit.excerpt(ran.stdout),
                    stderr_excerpt=self.audit.excerpt(ran.stderr),
                    stdout_bytes=len(ran.stdout),
                    stderr_bytes=len(ran.stderr),
                )
            out.append((RecordKind.HOOK, fields))
        return out


def reap_orphans(client: docker.DockerClient, worker_id: str, audit: AuditWriter) -> int:
    """Remove sandbox containers that a worker process which is gone left behind (a crash,
    a SIGKILL), recording each; how many were removed. Best effort: a failure is a warning."""
    try:
        orphans = reaper.reap(client, current_worker=worker_id)
    except Exception as exc:  # docker-py lets raw requests errors through
        print(f"cloudrunner: warning: could not look for orphaned sandboxes: {exc}",
              file=sys.stderr)  # fmt: skip
        return 0
    for orphan in orphans:
        audit.append(
            RecordKind.REAPED,
            {
                "container_id": orphan.container_id,
                "container_name": orphan.name,
                "owner": orphan.worker,
                "status": orphan.status,
                "reason": orphan.reason,
            },
        )
    return len(orphans)


def open_egress(settings: Settings, link: EngineLink) -> Egress:
    """The egress manager the settings describe (its proxy starts on first need)."""
    return Egress(
        settings.egress,
        client=link.client,
        state_dir=settings.state_dir,
        worker_id=settings.effective_worker_id,
        rules_file=settings.egress.rules_file,
        default_networks=lambda kind: settings.sandbox.profile_for(kind).network,
    )


def open_audit(settings: Settings) -> AuditWriter:
    """The audit writer the settings describe."""
    return AuditWriter(
        settings.audit_path,
        worker=settings.effective_worker_id,
        fsync=settings.audit.fsync,
        fsync_interval=settings.audit.fsync_interval,
        max_bytes=settings.audit.max_bytes,
        include_payload_text=settings.audit.include_payload_text,
        excerpt_cap=settings.audit.excerpt_bytes,
        on_torn=_report_torn,
    )


def _report_torn(ack: TornAcknowledgement) -> None:
    # stderr, never stdout: the operator sees it, the agent's answer stays clean
    print(f"cloudrunner: warning: {ack.message()}", file=sys.stderr)


_LIMIT_KEYS = (
    "memory", "memory_swap", "cpu_quota", "cpu_period", "pids_limit", "tmpfs", "ulimits",
    "network", "read_only_rootfs",
)  # fmt: skip


def _attested_limits(attestation: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    """The limits the engine reported in force for this hook's container, plus its timeout."""
    found = {key: attestation[key] for key in _LIMIT_KEYS if key in attestation}
    return {**found, "timeout_s": timeout}


def _safe_text(value: Any) -> str:
    """An id as text any record can hold: a surrogate or a NUL is escaped, not kept."""
    if value is None or value == "":
        return ""
    if isinstance(value, dict | list):
        return f"({type(value).__name__})"  # not an id; its repr could nest without end
    text = value if isinstance(value, str) else str(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00")


def _nothing() -> None:
    """Nothing to wait for."""


class _Prepared(NamedTuple):
    """What an event's hooks need besides the plan, made while its first record syncs."""

    shown: transcript.Transcript | None
    homes: dict[SourceKind, _Home]
    sandboxes: SandboxSet


@dataclass(frozen=True)
class _Home:
    """A source's HOME for one event: where (None: the image's), what the record says, and
    the error that stops the source's hooks (over its size limit)."""

    path: Path | None
    view: dict[str, object]
    error: CloudrunnerError | None = None


def _sandbox_view(
    access: ownership.AccessReport | None,
    shown: transcript.Transcript | None,
    homes: Mapping[SourceKind, _Home],
) -> dict[str, Any]:
    """What the decision record says about the hooks' view: how they got the owner's access
    to the workspace, the transcript (when the event names one) and each source's HOME."""
    view: dict[str, Any] = {}
    if access is not None:
        view["workspace_access"] = access.to_dict()
    if shown is not None:
        view["transcript"] = shown.to_dict()
    if homes:
        view["homes"] = {str(kind): home.view for kind, home in sorted(homes.items())}
    return view


def _source_key(source: LoadedSource) -> str:
    return f"{source.kind}:{source.path}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (several `run`s may want the same clone)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
