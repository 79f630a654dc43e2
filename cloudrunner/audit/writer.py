"""`AuditWriter`: appends hash-chained records to an audit log, safely across processes.

Every append takes an exclusive `flock` on `<log>.lock` (a file that is never rotated, so
all writers lock the same inode), checks that its descriptor still names the live file
(another process may have rotated it), re-reads the chain's tail when the file changed
since this writer last wrote, and only then chains and writes the record with one
`write(2)` on an O_APPEND descriptor. A writer killed mid-line leaves a torn line; the next
writer terminates it and appends a `torn_record` naming its offset, length and sha256
before going on from the last intact record: torn bytes are never rewritten or dropped.

With fsync "always", `append`/`append_many` return only once their records are on disk. The
fdatasync runs after the locks are released and is shared (group commit, see
`group_commit`): an append never waits for another's sync under the lock, and the records
every concurrent event appended while one sync ran are made durable by the next single sync,
so the chain's order is the order of the writes and the number of syncs does not grow with
the number of concurrent events.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structlog import BoundLoggerBase
from structlog.typing import Processor

from cloudrunner.audit.chain import CHAIN_KEYS, GENESIS_HASH
from cloudrunner.audit.failures import AuditLogError
from cloudrunner.audit.group_commit import (
    DURABLE_NOW,
    Durability,
    GroupCommit,
    SyncFailed,
)
from cloudrunner.audit.lines import LogTail, TornSpan, read_tail
from cloudrunner.audit.options import (
    DEFAULT_EXCERPT_CAP,
    DEFAULT_FSYNC,
    DEFAULT_FSYNC_INTERVAL,
    DEFAULT_MAX_BYTES,
    AuditConfig,
    FsyncPolicy,
)
from cloudrunner.audit.processors import (
    ChainHead,
    Cleaned,
    Clock,
    chain_and_render,
    clean_value,
    record_processors,
    utc_now,
)
from cloudrunner.audit.records import RecordKind, TornRecordFields
from cloudrunner.audit.redaction import excerpt
from cloudrunner.audit.rotation import lock_path, rotated_numbers, rotated_path
from cloudrunner.closing import ClosesOnExit

AuditRecord = dict[str, Any]

_RESERVED = CHAIN_KEYS | {"kind"}
_FILE_MODE = 0o640


@dataclass(frozen=True)
class TornAcknowledgement:
    """Torn lines a writer found at the end of the log and acknowledged."""

    path: Path
    spans: tuple[TornSpan, ...]
    #: the seq of the torn_record that acknowledges them
    seq: int

    def message(self) -> str:
        where = ", ".join(f"{span.length} bytes at offset {span.offset}" for span in self.spans)
        return (
            f"audit log {self.path}: a writer was interrupted mid-record ({where}); "
            f"acknowledged by torn_record seq {self.seq}, the chain goes on"
        )


class _AuditLogger(BoundLoggerBase):
    """A structlog bound logger with one method: run the pipeline and hand the line on."""

    def audit(self, fields: dict[str, Any]) -> AuditRecord:
        args, kwargs = self._process_event("audit", None, fields)
        record: AuditRecord = self._logger.audit(*args, **kwargs)
        return record


class _Sink:
    """The structlog 'logger' at the end of the pipeline: writes what it is given."""

    def __init__(self, write: Callable[[bytes, AuditRecord], None]) -> None:
        self._write = write

    def audit(self, line: bytes, record: AuditRecord) -> AuditRecord:
        self._write(line, record)
        return record


class AuditWriter(ClosesOnExit):
    """Appends records to the audit log at `path` (created, with its directory, on first use)."""

    def __init__(
        self,
        path: Path | str,
        *,
        worker: str = "",
        fsync: FsyncPolicy | str = DEFAULT_FSYNC,
        fsync_interval: float = DEFAULT_FSYNC_INTERVAL,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        include_payload_text: bool = False,
        excerpt_cap: int = DEFAULT_EXCERPT_CAP,
        clock: Clock = utc_now,
        on_torn: Callable[[TornAcknowledgement], None] | None = None,
    ) -> None:
        # AuditConfig validates the knobs; the writer keeps them flat for the hot path.
        config = AuditConfig(
            path=Path(path),
            worker=worker,
            fsync=FsyncPolicy(fsync),
            fsync_interval=fsync_interval,
            max_bytes=max_bytes,
            include_payload_text=include_payload_text,
            excerpt_cap=excerpt_cap,
        )
        self.path = config.path
        self.config = config
        self._on_torn = on_torn
        self.acknowledged: list[TornAcknowledgement] = []
        self._thread_lock = threading.Lock()
        self._fd: int | None = None
        self._file_id: tuple[int, int] | None = None
        self._lock_fd: int | None = None
        # The size the live file had after this writer's last write: while it is unchanged,
        # nobody else wrote and the cached chain head is the file's tail.
        self._known_size: int | None = None
        self._head = ChainHead(-1, GENESIS_HASH)
        self._prefix = b""
        self._dirty = False
        self._batching = False
        self._last_sync = time.monotonic()
        # Batches appended by this writer (under the lock) and the group commit of their sync.
        self._generation = 0
        self._group = GroupCommit(self._group_sync)
        self._sync_count = 0
        #: operations on the log that failed with an OS error (the daemon's metrics read it)
        self.failures = 0
        # Appends under way (waiting for the lock, writing or waiting for their sync).
        self._arrivals = 0
        self._arrivals_lock = threading.Lock()
        processors: list[Processor] = [
            *record_processors(
                worker=worker, include_payload_text=include_payload_text, clock=clock
            ),
            chain_and_render(self._head),
        ]
        self._logger = _AuditLogger(_Sink(self._write_line), processors, {})

    @classmethod
    def from_config(
        cls,
        config: AuditConfig,
        *,
        clock: Clock = utc_now,
        on_torn: Callable[[TornAcknowledgement], None] | None = None,
    ) -> AuditWriter:
        return cls(
            config.path,
            worker=config.worker,
            fsync=config.fsync,
            fsync_interval=config.fsync_interval,
            max_bytes=config.max_bytes,
            include_payload_text=config.include_payload_text,
            excerpt_cap=config.excerpt_cap,
            clock=clock,
            on_torn=on_torn,
        )

    # -- the public API -------------------------------------------------------------------

    def excerpt(self, data: bytes | str) -> str:
        """A redacted excerpt capped at this log's `excerpt_cap`."""
        return excerpt(data, self.config.excerpt_cap)

    def cleaned(self, key: str, value: Any) -> Cleaned:
        """`value` as this log stores it under the top-level field `key`, for records to
        take as it is: for a value that many records carry unchanged."""
        return clean_value(key, value, include_payload_text=self.config.include_payload_text)

    def append(
        self,
        kind: RecordKind | str,
        fields: Mapping[str, Any] | None = None,
        *,
        durable: bool = False,
        deferred: bool = False,
    ) -> AuditRecord:
        """Append one record; returns it as written (with seq, prev_hash and hash)."""
        return self.append_many([(kind, fields or {})], durable=durable, deferred=deferred)[0]

    def append_many(
        self,
        entries: Iterable[tuple[RecordKind | str, Mapping[str, Any]]],
        *,
        durable: bool = False,
        deferred: bool = False,
    ) -> list[AuditRecord]:
        """Append several records under one lock, so an event's records stay together.

        With fsync "always", or `durable` under any policy but "never", it returns once
        they are on disk: one fdatasync for the whole batch, made after the lock is released
        and shared with every batch appended while the previous sync ran (group commit).

        `deferred`: the caller appends again before it answers, and that append's sync
        (under the same policy) makes this one durable too, so this one makes no sync of its
        own, whatever the policy. A sync covers everything written before it, a rotation
        syncs the file it leaves, so the order of the chain is kept either way."""
        if durable and deferred:
            raise ValueError("an append is either durable on its own or deferred, not both")
        prepared = [self._prepare(kind, fields) for kind, fields in entries]
        policy = self.config.fsync
        synced = not deferred and (
            policy is FsyncPolicy.ALWAYS or (durable and policy is not FsyncPolicy.NEVER)
        )
        with self._arrivals_lock:
            self._arrivals += 1
        try:
            with self._locked():
                self._batching = True
                try:
                    written = [self._logger.audit(fields) for fields in prepared]
                finally:
                    self._batching = False
                    self._generation += 1
                    generation = self._generation
                if (
                    self._dirty
                    and policy is FsyncPolicy.INTERVAL
                    and time.monotonic() - self._last_sync >= self.config.fsync_interval
                ):
                    self._fdatasync()
            if synced:
                # Never under the lock: the next append writes while the disk works, and its
                # caller waits for the sync (the next one covers it), not for this one's lock.
                self._group.wait(generation)
        finally:
            with self._arrivals_lock:
                self._arrivals -= 1
        return written

    def append_unsynced(
        self, kind: RecordKind | str, fields: Mapping[str, Any]
    ) -> tuple[AuditRecord, Durability]:
        """Append one record without syncing it; its `Durability.wait()` makes it durable
        (one fdatasync, shared with concurrent events through the group commit) and raises
        AuditLogError when it cannot be. For a caller with work to do while the disk
        works: an event's `received` record must be durable before a hook starts, not
        before the event's sandbox is borrowed. Under fsync "never" nothing is synced, as
        for `append(durable=True)`."""
        prepared = self._prepare(kind, fields)
        with self._locked():
            self._batching = True
            try:
                record = self._logger.audit(prepared)
            finally:
                self._batching = False
                self._generation += 1
                generation = self._generation
        if self.config.fsync is FsyncPolicy.NEVER:
            return record, DURABLE_NOW
        return record, Durability(self._group, generation)

    def sync(self) -> None:
        """Force what was written to disk, whatever the fsync policy."""
        with self._thread_lock:
            if self._fd is not None and self._dirty:
                self._fdatasync()

    @property
    def syncs(self) -> int:
        """How many fdatasync calls this writer made so far (tests, the bench)."""
        return self._sync_count

    def close(self) -> None:
        with self._thread_lock:
            if self._fd is not None:
                if self._dirty and self.config.fsync is not FsyncPolicy.NEVER:
                    self._fdatasync()
                os.close(self._fd)
                self._fd = None
                self._file_id = None
                self._known_size = None
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    # -- locking and the tail -------------------------------------------------------------

    @staticmethod
    def _prepare(kind: RecordKind | str, fields: Mapping[str, Any]) -> dict[str, Any]:
        kind = str(kind)
        if not kind:
            raise ValueError("an audit record needs a non-empty kind")
        clash = _RESERVED.intersection(fields)
        if clash:
            raise ValueError(
                f"audit fields may not set {', '.join(sorted(clash))}: the writer owns them"
            )
        return {**fields, "kind": kind}

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            lock_fd = self._open_lock()
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            try:
                self._sync_tail()
                yield
            finally:
                fcntl.flock(lock_fd, fcntl.LOCK_UN)

    def _open_lock(self) -> int:
        if self._lock_fd is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._lock_fd = os.open(
                    lock_path(self.path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, _FILE_MODE
                )
            except OSError as exc:
                raise self._error("cannot open the lock file of", exc) from exc
        return self._lock_fd

    def _open_live(self) -> int:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, _FILE_MODE)
        except OSError as exc:
            raise self._error("cannot open", exc) from exc
        st = os.fstat(fd)
        self._fd, self._file_id, self._known_size = fd, (st.st_dev, st.st_ino), None
        return fd

    def _sync_tail(self) -> None:
        """Under the lock: make sure we hold the live file and know its chain tail."""
        st: os.stat_result | None = None
        try:
            st = os.stat(self.path)
            current: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            current = None
        except OSError as exc:
            raise self._error("cannot read", exc) from exc
        if self._fd is None or current != self._file_id:
            if self._fd is not None:
                # Another process rotated the file: what this writer wrote to the old one
                # and a waiting event still counts on must reach the disk before we let go.
                if self._dirty and self.config.fsync is not FsyncPolicy.NEVER:
                    self._fdatasync()
                os.close(self._fd)
                self._fd = None
            fd = self._open_live()
        else:
            fd = self._fd
        # The path names our file (same device and inode): its stat is our file's size.
        size = st.st_size if st is not None and current == self._file_id else os.fstat(fd).st_size
        if size == self._known_size:
            return
        tail = read_tail(fd, self.path)
        head = tail.head if tail.head is not None else self._rotated_head()
        self._head.seq, self._head.hash = head.seq, head.hash
        self._known_size = tail.size
        if tail.torn:
            self._acknowledge(tail)
        elif tail.unterminated:
            # A whole record that only lacks its newline: terminate it and go on.
            self._write_bytes(b"\n")

    def _rotated_head(self) -> ChainHead:
        """The chain's tail when the live file holds no record: the newest rotated file's."""
        numbers = rotated_numbers(self.path)
        if not numbers:
            return ChainHead(-1, GENESIS_HASH)
        newest = rotated_path(self.path, numbers[0])
        try:
            fd = os.open(newest, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise AuditLogError(
                f"cannot read rotated audit log {newest}: {exc.strerror}; the chain continues "
                "from it, so fix its permissions or move the whole rotated set aside"
            ) from exc
        try:
            tail = read_tail(fd, newest)
        finally:
            os.close(fd)
        if tail.head is None or tail.torn or tail.unterminated:
            raise AuditLogError(
                f"rotated audit log {newest} does not end with an intact record; check it "
                f"with `cloudrunner audit verify {self.path}`"
            )
        return tail.head

    def _acknowledge(self, tail: LogTail) -> None:
        self._prefix = b"\n" if tail.unterminated else b""
        try:
            fields: TornRecordFields = {"torn": [span.fields() for span in tail.torn]}
            record = self._logger.audit({"kind": str(RecordKind.TORN_RECORD), **fields})
        finally:
            self._prefix = b""
        ack = TornAcknowledgement(self.path, tail.torn, record["seq"])
        self.acknowledged.append(ack)
        if self._on_torn is not None:
            self._on_torn(ack)

    # -- writing --------------------------------------------------------------------------

    def _write_line(self, line: bytes, record: AuditRecord) -> None:
        """The sink: rotate if the line would overflow the file, write it, advance the head."""
        data = self._prefix + line
        limit = self.config.max_bytes
        known = self._known_size or 0
        # Never rotate between torn bytes and the record that acknowledges them.
        if limit is not None and not self._prefix and known > 0 and known + len(data) > limit:
            self._rotate()
        self._write_bytes(data)
        self._head.seq, self._head.hash = record["seq"], record["hash"]

    def _write_bytes(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError as exc:
            # Part of the line may be on disk: re-read the tail before the next append.
            self._known_size = None
            raise self._error("cannot write to", exc) from exc
        self._known_size = (self._known_size or 0) + len(data)
        self._dirty = True
        policy = self.config.fsync
        if self._batching:
            return  # append_many syncs once at the end
        if policy is FsyncPolicy.ALWAYS or (
            policy is FsyncPolicy.INTERVAL
            and time.monotonic() - self._last_sync >= self.config.fsync_interval
        ):
            self._fdatasync()

    def _fdatasync(self) -> None:
        """Under the lock: sync the live file; every batch completed so far is durable."""
        assert self._fd is not None
        try:
            os.fdatasync(self._fd)
        except OSError as exc:
            raise self._error("cannot sync", exc) from exc
        self._dirty = False
        self._last_sync = time.monotonic()
        self._sync_count += 1
        self._group.covered(self._generation)

    def _group_sync(self) -> int:
        """The group commit's sync: snapshot the newest batch and the live file under the
        lock, then fdatasync a duplicate of its descriptor outside it, so appends go on (and
        a rotation or close may replace the descriptor) while the disk works."""
        with self._thread_lock:
            generation = self._generation
            if self._fd is None or not self._dirty:
                return generation  # closed or synced under the lock since: nothing to do
            try:
                fd = os.dup(self._fd)
            except OSError as exc:
                raise SyncFailed(generation, self._error("cannot sync", exc)) from exc
            self._dirty = False
        try:
            os.fdatasync(fd)
        except OSError as exc:
            with self._thread_lock:
                self._dirty = True
            raise SyncFailed(generation, self._error("cannot sync", exc)) from exc
        finally:
            os.close(fd)
        self._last_sync = time.monotonic()
        self._sync_count += 1  # a lost update under a race only miscounts, never syncs less
        return generation

    def _rotate(self) -> None:
        """audit.log -> audit.log.1, audit.log.1 -> audit.log.2, ... then a fresh audit.log."""
        assert self._fd is not None
        if self._dirty and self.config.fsync is not FsyncPolicy.NEVER:
            self._fdatasync()
        try:
            for number in reversed(rotated_numbers(self.path)):
                os.rename(rotated_path(self.path, number), rotated_path(self.path, number + 1))
            os.rename(self.path, rotated_path(self.path, 1))
        except OSError as exc:
            raise self._error("cannot rotate", exc) from exc
        os.close(self._fd)
        self._fd = None
        self._open_live()
        self._known_size = 0
        if self.config.fsync is not FsyncPolicy.NEVER:
            self._sync_directory()

    def _sync_directory(self) -> None:
        try:
            dir_fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise self._error("cannot sync the directory of", exc) from exc
        try:
            os.fsync(dir_fd)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.EROFS):
                raise self._error("cannot sync the directory of", exc) from exc
        finally:
            os.close(dir_fd)

    def _error(self, doing: str, exc: OSError) -> AuditLogError:
        reason = exc.strerror or str(exc)
        self.failures += 1
        return AuditLogError(
            f"{doing} audit log {self.path}: {reason}; every event needs its audit records, "
            "so fix the path or its permissions (or point --audit-log elsewhere)"
        )
