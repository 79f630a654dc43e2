"""The daemon's core: workers per workspace over one audit log, one engine link and one
pool of warm session sandboxes; daemon sessions; readiness; draining. No HTTP here
(`app.py` is the API over this, `listeners.py` the sockets it is served on).

A *daemon session* is a workspace the daemon serves: the default one (from the settings:
`--workspace`, `--repo`, or each payload's `workspace_roots`) and those created through
the API for other workspaces or repositories, each with its own gate state. Conversations
(the payloads' `conversation_id`) live inside a daemon session; their state is on disk
(`session.py`), so a restarted daemon carries on where the last one stopped.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cloudrunner import gate, hook_home, refusals
from cloudrunner.audit.fallback import IngestReport, ingest
from cloudrunner.closing import ClosesOnExit
from cloudrunner.daemon.fail_policy import PolicyBook
from cloudrunner.daemon.metrics import DaemonMetrics
from cloudrunner.egress.manager import EgressRulesError
from cloudrunner.egress.proxy import EgressUnavailable
from cloudrunner.errors import CloudrunnerError
from cloudrunner.logs import get_logger
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.profiles import SOURCE_NAMES, SourceKind
from cloudrunner.refusals import ErrorCode
from cloudrunner.sandbox.engine import EngineLink
from cloudrunner.sandbox.session_pool import SessionPool
from cloudrunner.settings import Settings
from cloudrunner.sources import SourceSet
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

DEFAULT_SESSION = "default"
_SWEEP_INTERVAL_S = 5.0


class DaemonError(CloudrunnerError):
    """A request the daemon cannot serve; `code` is stable, its HTTP status is the one the
    table of error codes (`cloudrunner.refusals`) gives it."""

    def __init__(self, message: str, code: ErrorCode) -> None:
        super().__init__(message)
        self.code = code

    @property
    def status(self) -> int:
        return refusals.STATUS[self.code]


@dataclass(frozen=True)
class SessionInfo:
    id: str
    workspace: str | None
    repo: str | None
    ref: str | None
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        """What the API shows: the repository URL without user info."""
        return {**self.record(), "repo": redact_url(self.repo) if self.repo else self.repo}

    def record(self) -> dict[str, Any]:
        """What the session registry keeps (a repository URL never carries a password)."""
        return {
            "session": self.id,
            "workspace": self.workspace,
            "repo": self.repo,
            "ref": self.ref,
            "created_at": self.created_at,
        }


@dataclass
class _Session:
    info: SessionInfo
    worker: Worker
    gate_dir: Path


class Daemon(ClosesOnExit):
    """Everything `cloudrunner serve` holds between requests."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.worker_id = settings.effective_worker_id
        self.metrics = DaemonMetrics()
        self.link = EngineLink(None)
        self.audit = open_audit(settings)
        self.egress = open_egress(settings, self.link)
        self.pool = SessionPool(
            self.link,
            max_warm=settings.server.max_warm,
            idle_timeout_s=settings.server.idle_timeout_s,
        )
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(settings.server.max_concurrent_events)
        self._waiting = 0
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)
        self._draining = False
        self._stop = threading.Event()
        self._registry = settings.state_dir / "daemon" / "sessions.json"
        #: the fail policy published beside the socket for clients that find no daemon
        self.policy = PolicyBook(settings.socket_path.parent, daemon_id=self.worker_id)
        self._sessions: dict[str, _Session] = {}
        self._sessions[DEFAULT_SESSION] = _Session(
            SessionInfo(DEFAULT_SESSION, None, None, None, _now()),
            self._worker(settings, settings.state_dir, session_id=DEFAULT_SESSION),
            settings.state_dir,
        )
        self._restore_sessions()
        self.metrics.gauge(
            "cloudrunner_warm_sandboxes", "warm session sandboxes open", lambda: len(self.pool)
        )
        self.metrics.gauge(
            "cloudrunner_queue_depth",
            "events waiting for a free slot (server.max_concurrent_events)",
            lambda: self._waiting,
        )
        self.metrics.gauge(
            "cloudrunner_events_in_flight", "events being handled now", lambda: self._in_flight
        )
        self.metrics.gauge(
            "cloudrunner_sessions", "daemon sessions, the default one included",
            lambda: len(self._sessions),
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
        with self._lock:
            sessions = list(self._sessions.items())
        for session_id, session in sessions:
            root, sources = session.worker.startup_sources()
            self.policy.observe(session_id, root, sources, publish=False)
        return self.policy.publish()

    def drain(self, timeout_s: float) -> bool:
        """Refuse new events and wait for those in flight; True when all finished in time."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            self._draining = True
            while self._in_flight or self._waiting:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close_sandboxes(self) -> None:
        """Close every warm sandbox (a run still going ends as a sandbox_error)."""
        self._stop.set()
        self.pool.close()

    def close(self) -> None:
        """Close every warm sandbox and flush and close the audit log."""
        self.close_sandboxes()
        for session in list(self._sessions.values()):
            session.worker.close()
        self.audit.close()

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
        with self._lock:
            if self._draining:
                raise _draining()
            self._waiting += 1

    def unqueue_event(self) -> None:
        """Undo `queue_event` for an event that will not be handled after all."""
        with self._idle:
            self._waiting -= 1
            self._idle.notify_all()

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
        with self._slot(queued):
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
        if event == "sessionEnd" and reply.conversation_id:
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

    @contextmanager
    def _slot(self, queued: bool = False) -> Iterator[None]:
        if not queued:
            self.queue_event()
        self._slots.acquire()
        with self._lock:
            self._waiting -= 1
            self._in_flight += 1
        try:
            yield
        finally:
            self._slots.release()
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    # ------------------------------------------------------------------ sessions

    def create_session(
        self, *, workspace: str | None = None, repo: str | None = None, ref: str | None = None
    ) -> SessionInfo:
        if bool(workspace) == bool(repo):
            raise DaemonError(
                'give exactly one of "workspace" (a checkout to adopt) or "repo" (to clone)',
                ErrorCode.INVALID_REQUEST,
            )
        if repo and _has_password(repo):
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
        with self._lock:
            if len(self._sessions) > self.settings.server.max_sessions:
                raise DaemonError(
                    f"{self.settings.server.max_sessions} daemon sessions are open, the most "
                    "server.max_sessions allows; close one (DELETE /v1/sessions/ID)",
                    ErrorCode.TOO_MANY_SESSIONS,
                )
        info = SessionInfo(uuid.uuid4().hex[:16], workspace, repo, ref, _now())
        session = self._open_session(info)
        with self._lock:
            self._sessions[info.id] = session
            self._save_registry()
        return info

    def close_session(self, session_id: str) -> int:
        """Close a daemon session and its warm sandboxes; how many sandboxes were closed."""
        if session_id == DEFAULT_SESSION:
            raise DaemonError(
                "the default session cannot be closed", ErrorCode.DEFAULT_SESSION
            )  # fmt: skip
        with self._lock:
            session = self._sessions.pop(session_id, None)
            if session is None:
                raise _unknown(session_id)
            self._save_registry()
        self.policy.forget(session_id)
        closed = 0
        for ws in session.worker.workspaces():
            closed += self.pool.close_workspace(ws.root)
        session.worker.close()
        if self.settings.home.remove_with_session:
            hook_home.remove_all(_session_homes(self.settings, session_id))
        return closed

    def egress_view(self) -> dict[str, Any]:
        """Each source's egress rules in force (the rules file's, or the last POST's)."""
        settings = self.egress.settings
        view: dict[str, Any] = {
            kind: settings.rules_for(kind).model_dump(mode="json") for kind in SOURCE_NAMES
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
        modes = {"open": gate.GateMode.OPEN, "closed": gate.GateMode.CLOSED,
                 "auto": gate.GateMode.AUTO}  # fmt: skip
        if state not in modes:
            raise DaemonError(
                f'"state" must be one of open, closed, auto, not {state!r}',
                ErrorCode.INVALID_REQUEST,
            )
        session = self._session(session_id)
        saved = gate.set_mode(session.gate_dir, modes[state])
        return {"session": session_id, "mode": saved.mode.value, "generation": saved.generation}

    def sessions(self) -> list[SessionInfo]:
        with self._lock:
            return [session.info for session in self._sessions.values()]

    def session_info(self, session_id: str) -> SessionInfo:
        return self._session(session_id).info

    def _session(self, session_id: str) -> _Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise _unknown(session_id)
        return session

    def _open_session(self, info: SessionInfo) -> _Session:
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
        return _Session(info, worker, gate_dir)

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

    def _restore_sessions(self) -> None:
        try:
            data = json.loads(self._registry.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise CloudrunnerError(
                f"the daemon's session registry {self._registry} cannot be read ({exc}); "
                "move it aside to start with no daemon sessions"
            ) from None
        scrub = False
        for item in data.get("sessions", []) if isinstance(data, dict) else []:
            try:
                repo = item.get("repo")
                info = SessionInfo(
                    str(item["session"]),
                    item.get("workspace"),
                    redact_url(repo) if isinstance(repo, str) and _has_password(repo) else repo,
                    item.get("ref"),
                    str(item.get("created_at") or ""),
                )
            except (KeyError, TypeError):
                continue
            self._sessions[info.id] = self._open_session(info)
            scrub = scrub or info.repo != item.get("repo")
        if scrub:  # a registry written before passwords were refused: drop them from disk
            self._save_registry()

    def _save_registry(self) -> None:
        """Persist the API-created sessions (the lock is held)."""
        items = [s.info.record() for k, s in self._sessions.items() if k != DEFAULT_SESSION]
        self._registry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self._registry.with_name(f".{self._registry.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"sessions": items}, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self._registry)

    # ------------------------------------------------------------------ readiness

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Whether events can run now: the engine answers and every configured image is there."""
        if self._draining:
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
_KINDS = tuple(name for name in SOURCE_NAMES if SourceKind(name) is not SourceKind.USER)


def _draining() -> DaemonError:
    return DaemonError(
        "the daemon is shutting down; send the event again to its successor", ErrorCode.DRAINING
    )


def _unknown(session_id: str) -> DaemonError:
    return DaemonError(
        f"no daemon session {session_id!r}; create one with POST /v1/sessions "
        "(GET /v1/sessions lists them)",
        ErrorCode.UNKNOWN_SESSION,
    )


def _session_homes(settings: Settings, session_id: str) -> Path:
    """Where a daemon session's hook homes live (removed with the session)."""
    return settings.state_dir / "daemon" / "homes" / session_id


def _has_password(url: str) -> bool:
    try:
        return urlsplit(url.strip()).password is not None
    except ValueError:
        return False


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
