"""The fail policy the daemon publishes for its clients: `fail-policy.json` in its run
directory (the directory of its unix socket).

When no daemon answers, a client (`cloudrunner-hook`, `cloudrunner hook`) cannot load the
hooks itself; this file tells it which events have a `failClosed` command hook that would
run in the cloud, so it blocks those (naming what is down) and lets the others through.

    book = PolicyBook(run_dir, daemon_id="w1")
    book.observe("default", root, sources)     # after every load of the sources
    book.publish()                              # at start, once they are loaded

`observe` is on every event's path: it compares the versions of the sources with those seen
last for the same workspace and returns at once when they are the same; the file is written
only when the union of the events over every workspace changes. It is written atomically
(a temporary file beside it, fsync, rename, then the directory synced), mode 0644, and never
through a symlink planted in its place: the rename replaces the link itself. A file that
cannot be written is said on stderr in one line; the daemon goes on serving, and tries again
at the next change (or after `RETRY_S` when the set has not changed).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from cloudrunner.logs import get_logger
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sources import LoadedSource, SourceSet

_log = get_logger("cloudrunner.daemon")

POLICY_FILE = "fail-policy.json"
POLICY_VERSION = 1
#: after a failed write, an unchanged set is tried again at most this often
RETRY_S = 30.0

#: event -> the source kinds that have a failClosed hook for it
EventSources = dict[str, frozenset[SourceKind]]


def fail_closed_sources(sources: Iterable[LoadedSource]) -> EventSources:
    """Each cloud event with a `failClosed` command hook among the loaded `sources`, with
    the kinds of the sources that hold one (the hooks kept under the profile: a user
    source in the cloud, a prompt hook, a non-cloud event never count)."""
    found: dict[str, set[SourceKind]] = {}
    for source in sources:
        if not source.loaded:
            continue
        for event, entries in source.hooks.items():
            spec = EVENTS.get(event)
            if spec is None or not spec.in_cloud:
                continue
            for entry in entries:
                if entry.definition.fail_closed and entry.definition.type == "command":
                    found.setdefault(event, set()).add(source.kind)
                    break
    return {event: frozenset(kinds) for event, kinds in found.items()}


def _versions(sources: SourceSet) -> tuple[object, ...]:
    """What identifies the sources' content: a change here may change the policy."""
    return tuple((s.kind, s.status, s.sha256) for s in sources.sources)


def render(events: EventSources, *, daemon_id: str, pid: int, written_at: str) -> dict[str, object]:
    """The policy document (see the module docstring for where it goes)."""
    names = sorted(events)
    return {
        "version": POLICY_VERSION,
        "daemon": daemon_id,
        "pid": pid,
        "written_at": written_at,
        "fail_closed_events": names,
        "sources": {
            name: [kind.value for kind in SourceKind if kind in events[name]] for name in names
        },
    }


class PolicyWriteError(Exception):
    """The policy file could not be written (the message says where and why)."""


def write_policy(path: Path, document: dict[str, object]) -> None:
    """Write `document` to `path` atomically, mode 0644, never through a symlink."""
    data = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
    except OSError as exc:
        raise PolicyWriteError(f"cannot create {tmp}: {exc.strerror or exc}") from None
    try:
        try:
            os.fchmod(fd, 0o644)  # whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)  # a symlink at `path` is replaced, never followed
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise PolicyWriteError(f"cannot write {path}: {exc.strerror or exc}") from None
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class PolicyBook:
    """The failClosed events of every workspace the daemon serves, and the file that
    publishes their union."""

    def __init__(self, run_dir: Path, *, daemon_id: str, pid: int | None = None) -> None:
        self.path = run_dir / POLICY_FILE
        self.daemon_id = daemon_id
        self.pid = os.getpid() if pid is None else pid
        self._lock = threading.Lock()
        #: (daemon session, workspace) -> (versions of its sources, its events)
        self._seen: dict[tuple[str, Path | None], tuple[tuple[object, ...], EventSources]] = {}
        #: the union last written (None: nothing written yet, or the last write failed)
        self._published: EventSources | None = None
        self._retry_at = 0.0
        #: how many times the file was written (tests)
        self.writes = 0
        #: the last write's problem, one line (None when it was written)
        self.problem: str | None = None

    def observe(
        self, session: str, root: Path | None, sources: SourceSet, *, publish: bool = True
    ) -> None:
        """A daemon session loaded `sources` for the workspace `root` (None: none known
        yet, the operator's sources alone): publish again if that changes the union
        (`publish` false: only note them, `publish()` follows)."""
        key = (session, root)
        versions = _versions(sources)
        seen = self._seen.get(key)
        if seen is not None and seen[0] == versions and self._current():
            return  # the common case: nothing changed since the last event
        with self._lock:
            events = fail_closed_sources(sources.sources)
            self._seen[key] = (versions, events)
            if root is not None:
                # the operator's sources are loaded with every workspace's: the entry
                # without one would only keep their old versions
                self._seen.pop((session, None), None)
            if publish:
                self._publish_locked(force=False)

    def forget(self, session: str) -> None:
        """Drop every workspace of a daemon session that closed."""
        with self._lock:
            for key in [k for k in self._seen if k[0] == session]:
                del self._seen[key]
            self._publish_locked(force=False)

    def publish(self) -> bool:
        """Write the file now (at start); True when it was written."""
        with self._lock:
            return self._publish_locked(force=True)

    def events(self) -> EventSources:
        """The union over every workspace seen."""
        with self._lock:
            return self._union()

    def _current(self) -> bool:
        """Whether the file holds the union (or a failed write is not due to be retried)."""
        return self._published is not None or time.monotonic() < self._retry_at

    def _union(self) -> EventSources:
        merged: dict[str, frozenset[SourceKind]] = {}
        for _versions_seen, events in self._seen.values():
            for event, kinds in events.items():
                merged[event] = merged.get(event, frozenset()) | kinds
        return merged

    def _publish_locked(self, *, force: bool) -> bool:
        union = self._union()
        if not force and union == self._published:
            return False
        if not force and self._published is None and time.monotonic() < self._retry_at:
            return False
        document = render(
            union,
            daemon_id=self.daemon_id,
            pid=self.pid,
            written_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        try:
            write_policy(self.path, document)
        except PolicyWriteError as exc:
            self._published = None
            self._retry_at = time.monotonic() + RETRY_S
            self.problem = (
                f"the fail policy could not be published: {exc}; clients that find no daemon "
                "will not know which events have a failClosed hook (they let every event "
                "through unless given --fail-closed); make the directory writable for the "
                "daemon's user"
            )
            _log.warning("daemon.fail_policy_unpublished", problem=self.problem)
            return False
        self._published = union
        self.problem = None
        self.writes += 1
        return True
