"""The daemon sessions: the default one (the settings' workspace) and those created through
the API, each a worker over its own workspace with its own gate state. The API-created ones
are kept in `<state_dir>/daemon/sessions.json`, so a restarted daemon serves them again (a
repository URL is kept without its password)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cloudrunner.daemon.request_errors import unknown_session
from cloudrunner.errors import CloudrunnerError
from cloudrunner.worker import Worker
from cloudrunner.workspace import redact_url

DEFAULT_SESSION = "default"


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
class DaemonSession:
    info: SessionInfo
    worker: Worker
    gate_dir: Path


class SessionRegistry:
    """The open daemon sessions by id; `open_session` makes one's worker."""

    def __init__(self, path: Path, open_session: Callable[[SessionInfo], DaemonSession]) -> None:
        self.path = path
        self._open = open_session
        self._lock = threading.Lock()
        self._sessions: dict[str, DaemonSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str) -> DaemonSession:
        """The session (a dict read: the event path asks on every event); DaemonError
        (unknown_session) when there is none."""
        session = self._sessions.get(session_id)
        if session is None:
            raise unknown_session(session_id)
        return session

    def all(self) -> list[DaemonSession]:
        with self._lock:
            return list(self._sessions.values())

    def add_default(self, session: DaemonSession) -> None:
        with self._lock:
            self._sessions[session.info.id] = session

    def add(self, session: DaemonSession) -> None:
        """Add an API-created session and persist the registry."""
        with self._lock:
            self._sessions[session.info.id] = session
            self._save()

    def count(self) -> int:
        with self._lock:
            return len(self._sessions)

    def remove(self, session_id: str) -> DaemonSession:
        """Remove a session and persist the registry; DaemonError when there is none."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
            if session is None:
                raise unknown_session(session_id)
            self._save()
        return session

    def restore(self) -> None:
        """Open the sessions the registry file names (a file kept by an older daemon may
        hold a repository URL with a password: it is dropped from disk)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise CloudrunnerError(
                f"the daemon's session registry {self.path} cannot be read ({exc}); "
                "move it aside to start with no daemon sessions"
            ) from None
        scrub = False
        for item in data.get("sessions", []) if isinstance(data, dict) else []:
            if not isinstance(item, dict):  # not an entry this daemon wrote: passed over
                continue
            try:
                repo = item.get("repo")
                info = SessionInfo(
                    str(item["session"]),
                    item.get("workspace"),
                    redact_url(repo) if isinstance(repo, str) and has_password(repo) else repo,
                    item.get("ref"),
                    str(item.get("created_at") or ""),
                )
            except (KeyError, TypeError):
                continue
            session = self._open(info)
            with self._lock:
                self._sessions[info.id] = session
            scrub = scrub or info.repo != item.get("repo")
        if scrub:  # a registry written before passwords were refused: drop them from disk
            with self._lock:
                self._save()

    def _save(self) -> None:
        """Persist the API-created sessions (the lock is held)."""
        items = [s.info.record() for k, s in self._sessions.items() if k != DEFAULT_SESSION]
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"sessions": items}, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)


def has_password(url: str) -> bool:
    try:
        return urlsplit(url.strip()).password is not None
    except ValueError:
        return False


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
