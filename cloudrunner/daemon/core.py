"""The daemon's core: workers per workspace over one audit log, one engine link and one
pool of warm session sandboxes. No HTTP here (`app.py` is the API over this, `listeners.py`
the sockets it is served on). The `Daemon` owns the life cycle (start, drain, close) and
puts together the parts an event meets: `admission.Admission` (slots, the queue, the
drain), `registry.SessionRegistry` (the daemon sessions and their workers), the fail
policy and the metrics.

A *daemon session* is a workspace the daemon serves: the default one (from the settings:
`--workspace`, `--repo`, or each payload's `workspace_roots`) and those created through
the API for other workspaces or repositories, each with its own gate state. Conversations
(the payloads' `conversation_id`) live inside a daemon session; their state is on disk
(`session.py`), so a restarted daemon carries on where the last one stopped.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

from cloudrunner.audit.fallback import IngestReport, ingest
from cloudrunner.closing import ClosesOnExit
from cloudrunner.daemon.admission import Admission
from cloudrunner.daemon.fail_policy import PolicyBook
from cloudrunner.daemon.metrics import DaemonMetrics
from cloudrunner.daemon.registry import (
    DEFAULT_SESSION,
    DaemonSession,
    SessionInfo,
    SessionRegistry,
    has_password,
    now,
)
from cloudrunner.daemon.request_errors import DaemonError
from cloudrunner.egress import EgressRulesError, EgressUnavailable
from cloudrunner.errors import CloudrunnerError
from cloudrunner.event import GateMode, remove_homes, set_mode
from cloudrunner.logs import get_logger
from cloudrunner.protocol.event_names import SESSION_END
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.refusals import ErrorCode
from cloudrunner.sandbox.engine import EngineLink
from cloudrunner.sandbox.session_pool import SessionPool
from cloudrunner.settings import Settings
from cloudrunner.sources import SourceSet
from cloudrunner.telemetry import start as start_tracing
from cloudrunner.worker import (
    EventReply,
    PayloadRefused,
    Worker,
    open_audit,
    open_egress,
    reap_orphans,
)
from cloudrunner.workspace import redact_url

_log = get_logger("cloudrunner.daemon")

_SWEEP_INTERVAL_S = 5.0

__all__ = ["DEFAULT_SESSION", "Daemon", "DaemonError", "DaemonSession", "SessionInfo"]


class Daemon(ClosesOnExit):
    """Everything `cloudrunner serve` holds between requests."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.worker_id = settings.effective_worker_id
        self.metrics = DaemonMetrics()
        # first: an unusable OTEL_* endpoint stops the start before anything is opened
        self.tracing = start_tracing(settings.telemetry, self.worker_id)
        self.link = EngineLink(None)
        self.audit = open_audit(settings)
        self.egress = open_egress(settings, self.link)
        self.pool = SessionPool(
            self.link,
            max_warm=settings.server.max_warm,
            idle_timeout_s=settings.server.idle_timeout_s,
        )
        self.admission = Admission(settings.server.max_concurrent_events)
        self._stop = threading.Event()
        #: the fail policy published beside the socket for clients that find no daemon
        self.policy = PolicyBook(settings.socket_path.parent, daemon_id=self.worker_id)
        self.registry = SessionRegistry(
            settings.state_dir / "daemon" / "sessions.json", self._open_session
        )
        self.registry.add_default(
            DaemonSession(
                SessionInfo(DEFAULT_SESSION, None, None, None, now()),
                self._worker(settings, settings.state_dir, session_id=DEFAULT_SESSION),
                settings.state_dir,
            )
        )
        self.registry.restore()
        self.metrics.gauge(
            "cloudrunner_warm_sandboxes", "warm session sandboxes open", lambda: len(self.pool)
        )
        self.metrics.gauge(
            "cloudrunner_queue_depth",
            "events waiting for a free slot (server.max_concurrent_events)",
            lambda: self.admission.waiting,
        )
        self.metrics.gauge(
            "cloudrunner_events_in_flight",
            "events being handled now",
            lambda: self.admission.in_flight,
        )
        self.metrics.gauge(
            "cloudrunner_sessions", "daemon sessions, the default one included",
            lambda: len(self.registry),
        )  # fmt: skip
        self.metrics.gauge(
            "cloudrunner_max_sessions", "daemon sessions the API may create "
            "(server.max_sessions; the default one is not counted)",
            lambda: settings.server.max_sessions,
        )  # fmt: skip
        self.metrics.counter(
            "cloudrunner_audit_write_failures", "operations on the audit log that failed "
            "(open, write, sync, rotate) with an OS error",
            lambda: self.audit.failures,
        )  # fmt: skip
        self.metrics.readiness(self.readiness)
        self.metrics.counter(
            "cloudrunner_trace_spans_dropped", "trace spans not delivered to the OTLP collector "
            "(unreachable, slow or refusing them; the events were answered as ever)",
            lambda: self.tracing.dropped if self.tracing is not None else 0,
        )  # fmt: skip
        self._sweeper = threading.Thread(target=self._sweep, name="pool-sweeper", daemon=True)

    # ------------------------------------------------------------------ life cycle

    def start(self) -> int:
        """Before serving: take the fallback spool into the audit log, publish the fail
        policy of the sources loaded now, reap what a killed daemon left behind (when the
        engine answers) and start the idle sweeper; how many orphans were removed."""
        self.take_spool()
        self.publish_policy()
        removed = 0
        try:
            client = self.link.client()
        except CloudrunnerError as exc:
            _log.warning("daemon.engine_unreachable", detail=exc.message)
        else:
            removed = reap_orphans(client, self.worker_id, self.audit)
        self._sweeper.start()
        return removed

    def take_spool(self) -> IngestReport:
        """Record the events clients answered while no daemon answered (`fallback`)."""
        report = ingest(self.settings.socket_path.parent, self.audit)
        self.metrics.record_fallbacks(report.outcomes)
        if report.records:
            _log.warning(  # a warning, so the default level shows it: the agent was answered
                "daemon.spool_taken",  # without the hooks, and the operator should know
                detail=f"{report.records} event(s) answered without a daemon taken from the "
                "fallback spool into the audit log as kind fallback"
                + (f" ({report.invalid} invalid line(s), recorded as such)" if report.invalid
                   else ""),
                records=report.records,
                invalid=report.invalid,
            )  # fmt: skip
        for problem in report.problems:
            _log.warning("daemon.spool_problem", detail=problem)
        return report

    def publish_policy(self) -> bool:
        """Load every daemon session's sources as they are now and write the fail policy."""
        for session in self.registry.all():
            root, sources = session.worker.startup_sources()
            self.policy.observe(session.info.id, root, sources, publish=False)
        return self.policy.publish()

    def drain(self, timeout_s: float) -> bool:
        """Refuse new events and wait for those in flight; True when all finished in time."""
        return self.admission.drain(timeout_s)

    def close_sandboxes(self) -> None:
        """Close every warm sandbox (a run still going ends as a sandbox_error)."""
        self._stop.set()
        self.pool.close()

    def close(self) -> None:
        """Close every warm sandbox and flush and close the audit log."""
        self.close_sandboxes()
        for session in self.registry.all():
            session.worker.close()
        self.audit.close()
        if self.tracing is not None:
            self.tracing.close()

    def _sweep(self) -> None:
        while not self._stop.wait(_SWEEP_INTERVAL_S):
            try:
                self.pool.sweep()
            except Exception as exc:  # never let the sweeper die
                _log.warning(
                    "daemon.idle_sweep_failed", error_type=type(exc).__name__, error=str(exc)
                )

    # ------------------------------------------------------------------ events

    def queue_event(self) -> None:
        """Count an event as waiting for a slot before it is handed to a worker thread (so a
        drain waits for it); pass `queued=True` to `handle_event` for it. Raises DaemonError
        (draining) when the daemon is shutting down."""
        self.admission.queue()

    def unqueue_event(self) -> None:
        """Undo `queue_event` for an event that will not be handled after all."""
        self.admission.unqueue()

    def handle_event(
        self, session_id: str, event: str, payload: bytes, *, queued: bool = False
    ) -> EventReply:
        """Answer one event in a daemon session; raises DaemonError for a refused request."""
        try:
            session = self._session(session_id)
        except DaemonError:
            if queued:
                self.unqueue_event()
            raise
        label = event if event in EVENTS else "other"
        started = time.monotonic()
        with self.admission.slot(queued):
            try:
                reply = session.worker.handle(payload, event)
            except PayloadRefused as exc:
                self.metrics.record_event(label, "refused", time.monotonic() - started)
                raise DaemonError(exc.message, exc.code) from None
            except CloudrunnerError as exc:
                self.metrics.record_event(label, "error", time.monotonic() - started)
                raise DaemonError(exc.message, ErrorCode.WORKER_ERROR) from exc
        result = "gated" if reply.gated else "answered"
        self.metrics.record_event(
            label, result, time.monotonic() - started, reply.outcomes, reply.egress
        )
        if event == SESSION_END and reply.conversation_id:
            self.pool.close_session(reply.conversation_id)
        return reply

    def refuse_unread(
        self, session_id: str, event: str, reason: str, code: ErrorCode
    ) -> DaemonError:
        """Record a request refused before its body was read (over the size cap)."""
        session = self._session(session_id)
        self.metrics.record_event(event if event in EVENTS else "other", "refused", 0.0)
        try:
            session.worker.refuse(event, reason, code)
        except PayloadRefused as exc:
            return DaemonError(exc.message, exc.code)
        raise AssertionError("Worker.refuse returned")  # it always raises

    # ------------------------------------------------------------------ sessions

    def create_session(
        self, *, workspace: str | None = None, repo: str | None = None, ref: str | None = None
    ) -> SessionInfo:
        if bool(workspace) == bool(repo):
            raise DaemonError(
                'give exactly one of "workspace" (a checkout to adopt) or "repo" (to clone)',
                ErrorCode.INVALID_REQUEST,
            )
        if repo and has_password(repo):
            raise DaemonError(
                f"the repository URL {redact_url(repo)} carries a password; the daemon keeps no "
                "credentials in its session registry: send the URL without it and give the "
                "daemon the token through workspace.credential_env (CLOUDRUNNER_GIT_TOKEN) or "
                "workspace.credential_file",
                ErrorCode.INVALID_REQUEST,
            )
        if workspace and not Path(workspace).is_absolute():
            raise DaemonError(
                f'"workspace" must be an absolute path, not {workspace!r}',
                ErrorCode.INVALID_REQUEST,
            )
        if self.registry.count() > self.settings.server.max_sessions:
            raise DaemonError(
                f"{self.settings.server.max_sessions} daemon sessions are open, the most "
                "server.max_sessions allows; close one (DELETE /v1/sessions/ID)",
                ErrorCode.TOO_MANY_SESSIONS,
            )
        info = SessionInfo(uuid.uuid4().hex[:16], workspace, repo, ref, now())
        self.registry.add(self._open_session(info))
        return info

    def close_session(self, session_id: str) -> int:
        """Close a daemon session and its warm sandboxes; how many sandboxes were closed."""
        if session_id == DEFAULT_SESSION:
            raise DaemonError(
                "the default session cannot be closed", ErrorCode.DEFAULT_SESSION
            )  # fmt: skip
        session = self.registry.remove(session_id)
        self.policy.forget(session_id)
        closed = 0
        for ws in session.worker.workspaces():
            closed += self.pool.close_workspace(ws.root)
        session.worker.close()
        if self.settings.home.remove_with_session:
            remove_homes(_session_homes(self.settings, session_id))
        return closed

    def egress_view(self) -> dict[str, Any]:
        """Each source's egress rules in force (the rules file's, or the last POST's)."""
        settings = self.egress.settings
        view: dict[str, Any] = {
            kind.value: settings.rules_for(kind).model_dump(mode="json") for kind in SourceKind
        }
        view["proxy"] = self.egress.status()[1]
        return view

    def set_egress(self, source: str, rules: dict[str, Any]) -> dict[str, Any]:
        """Replace one source's egress rules; the proxy is reconfigured, so they hold from
        the source's next connection (no restart)."""
        try:
            self.egress.set_rules(source, rules)
        except EgressRulesError as exc:
            raise DaemonError(
                f"invalid egress rules for {source}: {exc.message}", ErrorCode.INVALID_REQUEST
            ) from None
        except EgressUnavailable as exc:
            raise DaemonError(exc.message, ErrorCode.EGRESS_UNAVAILABLE) from None
        return self.egress_view()

    def set_gate(self, session_id: str, state: str) -> dict[str, Any]:
        modes = {"open": GateMode.OPEN, "closed": GateMode.CLOSED,
                 "auto": GateMode.AUTO}  # fmt: skip
        if state not in modes:
            raise DaemonError(
                f'"state" must be one of open, closed, auto, not {state!r}',
                ErrorCode.INVALID_REQUEST,
            )
        session = self._session(session_id)
        saved = set_mode(session.gate_dir, modes[state])
        return {"session": session_id, "mode": saved.mode.value, "generation": saved.generation}

    def sessions(self) -> list[SessionInfo]:
        return [session.info for session in self.registry.all()]

    def session_info(self, session_id: str) -> SessionInfo:
        return self._session(session_id).info

    def _session(self, session_id: str) -> DaemonSession:
        return self.registry.get(session_id)

    def _open_session(self, info: SessionInfo) -> DaemonSession:
        base = self.settings.workspace
        if info.workspace:
            ws = base.model_copy(update={"path": Path(info.workspace), "repo": ""})
        else:
            ws = base.model_copy(update={"repo": info.repo or "", "ref": info.ref or "",
                                         "path": None})  # fmt: skip
        settings = self.settings.model_copy(update={"workspace": ws})
        gate_dir = self.settings.state_dir / "daemon" / "gates" / info.id
        worker = self._worker(
            settings, gate_dir, home_root=_session_homes(settings, info.id), session_id=info.id
        )
        return DaemonSession(info, worker, gate_dir)

    def _worker(
        self,
        settings: Settings,
        gate_dir: Path,
        home_root: Path | None = None,
        *,
        session_id: str,
    ) -> Worker:
        def on_sources(root: Path, sources: SourceSet) -> None:
            self.policy.observe(session_id, root, sources)

        return Worker(
            settings, client=self.link, audit=self.audit, pool=self.pool, gate_dir=gate_dir,
            reap=False, home_root=home_root, egress=self.egress, on_sources=on_sources,
        )  # fmt: skip

    # ------------------------------------------------------------------ readiness

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Whether events can run now: the engine answers and every configured image is there."""
        if self.admission.draining:
            return False, {"reason": "the daemon is shutting down"}
        try:
            client = self.link.client()
            client.ping()
        except Exception as exc:  # docker-py lets raw requests errors through
            text = getattr(exc, "message", None) or str(exc).splitlines()[0][:200]
            return False, {"reason": f"the Docker engine does not answer: {text}", "engine": False}
        images = sorted(
            {self.settings.sandbox.profile_for(kind).image for kind in _KINDS}
        )  # fmt: skip
        missing: list[str] = []
        for image in images:
            try:
                client.images.get(image)
            except Exception:
                missing.append(image)
        if missing:
            return False, {
                "reason": f"image(s) missing from the engine: {', '.join(missing)}; "
                "build them with `cloudrunner images build`",
                "engine": True,
                "missing_images": missing,
            }
        egress_ok, egress = self.egress.status()
        if not egress_ok:
            return False, {"reason": egress, "engine": True, "images": images, "egress": egress}
        return True, {
            "engine": True, "images": images, "warm_sandboxes": len(self.pool), "egress": egress,
        }  # fmt: skip


#: the sources a cloud worker loads (the user's is the desktop's)
_KINDS = tuple(kind for kind in SourceKind if kind is not SourceKind.USER)


def _session_homes(settings: Settings, session_id: str) -> Path:
    """Where a daemon session's hook homes live (removed with the session)."""
    return settings.state_dir / "daemon" / "homes" / session_id
