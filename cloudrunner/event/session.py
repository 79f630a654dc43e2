"""Per-conversation state that outlives one process: loop counts, session env, source hashes.

Each conversation's state is one small JSON file under `<state_dir>/sessions/`, named by the
sha256 of the conversation id alone (`c-<hex>.json`: nothing of the caller's id reaches the
file system). Failures to read or write are `SessionStateError`s, never raw OSErrors. Every change
is a read-modify-write under an exclusive `fcntl` lock on a sidecar lock file, and the new
content replaces the old with an atomic rename, so concurrent `cloudrunner run` processes on
one state directory never lose an increment and a crash never leaves a half-written file.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, Field, ValidationError

from cloudrunner.errors import CloudrunnerError
from cloudrunner.memo import BoundedMemo
from cloudrunner.protocol.loops import LoopBudget, consume


class SessionStateError(CloudrunnerError):
    pass


class SessionState(BaseModel):
    conversation_id: str
    #: follow-ups caused so far, per script key (see `loop_key`)
    loop_counts: dict[str, int] = Field(default_factory=dict)
    #: env from sessionStart answers (desktop profile); applies to every later hook
    env: dict[str, str] = Field(default_factory=dict)
    #: sha256 of each source file as last loaded, by source path
    source_hashes: dict[str, str] = Field(default_factory=dict)


_SAFE = re.compile(r"[^A-Za-z0-9._-]")


@functools.lru_cache(maxsize=1024)
def _file_stem(conversation_id: str) -> str:
    """The file name of a conversation's state: a hash of its id and nothing of the id
    itself (ids come from the caller: no length, character or encoding of theirs reaches
    the file system; surrogatepass so even an id Unicode cannot encode has a name)."""
    return "c-" + hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()


def _legacy_stem(conversation_id: str) -> str | None:
    """The name earlier versions gave the state (readable part + short hash), read when the
    state has no file under its new name yet; never written."""
    try:
        digest = hashlib.sha256(conversation_id.encode()).hexdigest()[:16]
    except UnicodeEncodeError:
        return None
    return f"{_SAFE.sub('_', conversation_id)[:64] or 'empty'}-{digest}"


#: a state file written more recently than this (ns) is read again on every load: within
#: one timer tick a rewrite could leave the same size and times
SETTLED_NS = 2_000_000_000


def _copy(state: SessionState) -> SessionState:
    """A copy of a validated state (its dicts copied: callers may change them)."""
    return SessionState.model_construct(
        conversation_id=state.conversation_id,
        loop_counts=dict(state.loop_counts),
        env=dict(state.env),
        source_hashes=dict(state.source_hashes),
    )


class SessionStore:
    def __init__(self, state_dir: Path) -> None:
        self.directory = state_dir / "sessions"
        # made once (an event's update need not ask again); made again if it vanishes
        self._made = False
        #: each state file's identity when last read, and what it held (see `load`)
        self._known: BoundedMemo[str, tuple[tuple[int, ...], SessionState]] = BoundedMemo(1024)

    def _paths(self, conversation_id: str) -> tuple[Path, Path]:
        stem = _file_stem(conversation_id)
        return self.directory / f"{stem}.json", self.directory / f"{stem}.lock"

    def load(self, conversation_id: str) -> SessionState:
        """The conversation's state. A state file unchanged since it was last read (same
        inode, size and times, written more than `SETTLED_NS` ago: every write is a new
        file renamed into place, so a change cannot keep them) is not read or validated
        again: a daemon loads it on every event and it changes rarely."""
        path, _ = self._paths(conversation_id)
        key = str(path)
        try:
            st = os.stat(key)
        except OSError:
            return self._read(path, conversation_id)
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        known = self._known.get(key)
        if known is not None and known[0] == identity:
            return _copy(known[1])
        state = self._read(path, conversation_id)
        if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > SETTLED_NS:
            self._known.put(key, (identity, _copy(state)))
        return state

    @contextlib.contextmanager
    def update(self, conversation_id: str) -> Iterator[SessionState]:
        """Yield the state under the conversation's lock; write it back if the block succeeds."""
        path, lock_path = self._paths(conversation_id)
        with self._open_lock(lock_path) as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                state = self._read(path, conversation_id)
                # Compared as dicts: the same content in another key order (the file is
                # written with sorted keys) is no change and needs no write.
                before = state.model_dump()
                yield state
                if state.model_dump() != before:
                    self._write(path, state)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _open_lock(self, lock_path: Path) -> BinaryIO:
        if self._made:
            try:
                return open(lock_path, "a+b")
            except FileNotFoundError:
                self._made = False
            except OSError as exc:
                raise SessionStateError(
                    f"cannot open the session state lock {lock_path}: {exc.strerror}"
                ) from exc
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            lock = open(lock_path, "a+b")  # noqa: SIM115 (the caller's with closes it)
        except OSError as exc:
            raise SessionStateError(
                f"cannot create the session state directory {self.directory}: {exc.strerror}; "
                "point --state-dir at a writable directory"
            ) from exc
        self._made = True
        return lock

    def _read(self, path: Path, conversation_id: str) -> SessionState:
        try:
            raw = _read_bytes(str(path))
        except FileNotFoundError:
            legacy = _legacy_stem(conversation_id)
            old = self.directory / f"{legacy}.json" if legacy else None
            if old is None or not old.is_file():
                return SessionState(conversation_id=conversation_id)
            return self._read(old, conversation_id)
        except OSError as exc:
            raise SessionStateError(f"cannot read session state {path}: {exc.strerror}") from exc
        try:
            # the standard library's decoder: it reads back the `\ud800` escapes json.dumps
            # writes for an id Unicode cannot encode (pydantic's JSON parser refuses them)
            state = SessionState.model_validate(json.loads(raw))
        except (ValidationError, ValueError, RecursionError) as exc:
            count = exc.error_count() if isinstance(exc, ValidationError) else 1
            raise SessionStateError(
                f"session state {path} is damaged ({count} problem(s)); "
                "move it aside to start the conversation's state afresh"
            ) from exc
        if state.conversation_id != conversation_id:
            raise SessionStateError(
                f"session state {path} belongs to another conversation "
                f"({state.conversation_id!r}); move it aside"
            )
        return state

    def _write(self, path: Path, state: SessionState) -> None:
        data = json.dumps(state.model_dump(), indent=1, sort_keys=True).encode() + b"\n"
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        except OSError as exc:
            raise SessionStateError(
                f"cannot write session state in {self.directory}: {exc.strerror or exc}"
            ) from exc
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException as exc:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise SessionStateError(
                    f"cannot write session state {path}: {exc.strerror or exc}"
                ) from exc
            raise


def _read_bytes(path: str) -> bytes:
    """A small file's bytes without the io stack (read twice per event)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


class PersistentLoopCounterStore:
    """The protocol's LoopCounterStore over SessionStore: counts survive restarts and are
    checked-and-counted under the conversation's lock, so concurrent workers agree."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        #: why a count could not be kept (the disk is full, ...): the worker reports them
        self.problems: list[str] = []

    def try_consume(self, conversation_id: str, script: str, limit: int | None) -> LoopBudget:
        """Check and count; when the count cannot be written, decide from the count read
        (the follow-up is then not counted) and note the problem, never raise."""
        try:
            with self._store.update(conversation_id) as state:
                budget = consume(state.loop_counts.get(script, 0), limit)
                state.loop_counts[script] = budget.used
                return budget
        except SessionStateError as exc:
            self.problems.append(f"{exc.message} (this follow-up was not counted)")
            try:
                used = self.used(conversation_id, script)
            except SessionStateError:
                used = 0
            return consume(used, limit)

    def used(self, conversation_id: str, script: str) -> int:
        return self._store.load(conversation_id).loop_counts.get(script, 0)
