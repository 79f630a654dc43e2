"""The proxy's access log, read back as audit records: one `egress` record per connection
attempt, allowed or refused, attributed to the hook run whose credential it carried and to
the sandbox it came from (by its address on that sandbox's own network): an attempt
without a credential, or with one refused outside its run, still names the session and
source it came from, and a refused reuse names the run the credential was issued to."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cloudrunner.audit.records import EgressFields, EgressRunFields, EgressSandboxFields
from cloudrunner.egress.grants import Grant, GrantBook

#: Squid result codes (the part before the slash) that mean "not let through"
_REFUSED = ("TCP_DENIED", "NONE_NONE", "TAG_NONE")
#: a single line longer than this is not from our logformat; it is skipped
_MAX_LINE = 16 * 1024


@dataclass(frozen=True)
class EgressAttempt:
    time: float
    user: str
    client: str
    method: str
    host: str
    port: int | None
    status: int
    bytes_to_hook: int
    bytes_from_hook: int
    result: str
    #: why the proxy's run check refused the credential (not-live, expired, wrong-source)
    refusal: str = ""

    @property
    def allowed(self) -> bool:
        return not self.result.startswith(_REFUSED) and self.status not in (403, 407)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def parse_line(line: str) -> EgressAttempt | None:
    """One line of the `cloudrunner` logformat, or None when it is not one."""
    fields = line.rstrip("\n").split("\t")
    if len(fields) == 11:  # written before the run check's field was logged
        fields.append("-")
    if len(fields) != 12:
        return None
    stamp, user, client, method, url, host, port, status, sent, received, result, note = fields
    try:
        when = float(stamp)
    except ValueError:
        return None
    if not host or host == "-":  # CONNECT: %>rd is empty in some builds; the URL is host:port
        host = url.rsplit(":", 1)[0] if method == "CONNECT" else url
    return EgressAttempt(
        time=when,
        user=user,
        client=client,
        method=method,
        host=host.lower(),
        port=_int(port) or None,
        status=_int(status),
        bytes_to_hook=_int(sent),
        bytes_from_hook=_int(received),
        result=result,
        refusal="" if note in ("-", "") else note[:64],
    )


class AccessLogReader:
    """Reads the lines appended since the last read by any process of this state directory:
    the read position is shared (`<log>.position`, under a lock), so each line becomes one
    record, however many worker processes use the proxy. Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._position = path.with_name(path.name + ".position")
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[tuple[int | None, int]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            fd = os.open(self._position, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                raw = os.pread(fd, 64, 0).decode(errors="replace").split()
                yield (int(raw[0]), int(raw[1])) if len(raw) == 2 else (None, -1)
            finally:
                os.close(fd)

    def _store(self, inode: int | None, offset: int) -> None:
        tmp = self._position.with_name(f".{self._position.name}-{os.getpid()}")
        tmp.write_text(f"{inode if inode is not None else 0} {offset}\n")
        os.replace(tmp, self._position)

    def skip_to_end(self) -> None:
        """Start after what is there now when no process read this log before."""
        with self._locked() as (_inode, offset):
            if offset >= 0:
                return
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                self._store(None, 0)
                return
            self._store(st.st_ino, st.st_size)

    def new_attempts(self) -> list[EgressAttempt]:
        with self._locked() as (inode, offset):
            try:
                with open(self.path, "rb") as fh:
                    st = os.fstat(fh.fileno())
                    if st.st_ino != inode or st.st_size < offset or offset < 0:
                        offset = 0  # a new file
                    fh.seek(offset)
                    data = fh.read()
            except FileNotFoundError:
                return []
            end = data.rfind(b"\n") + 1  # only complete lines; the rest waits
            self._store(st.st_ino, offset + end)
        out = []
        for raw in data[:end].splitlines():
            if len(raw) > _MAX_LINE:
                continue
            attempt = parse_line(raw.decode("utf-8", "replace"))
            if attempt is not None:
                out.append(attempt)
        return out


def _run_view(grant: Grant) -> EgressRunFields:
    run = grant.run
    return {
        "source": run.source, "session": run.session, "event": run.event,
        "conversation_id": run.conversation_id, "generation_id": run.generation_id,
        "hook_id": run.hook_id,
    }  # fmt: skip


def _attributed(fields: EgressFields, grant: Grant) -> None:
    """The attempt's own run: the one its credential was issued to."""
    run = grant.run
    fields["source"], fields["session"], fields["event"] = run.source, run.session, run.event
    fields["conversation_id"], fields["generation_id"] = run.conversation_id, run.generation_id
    fields["hook_id"], fields["command"] = run.hook_id, run.command


def record_fields(attempt: EgressAttempt, book: GrantBook) -> EgressFields:
    """The audit record of one attempt, with the run it is attributed to."""
    grant = book.lookup(attempt.user) if attempt.user not in ("-", "") else None
    fields: EgressFields = {
        "decision": "allowed" if attempt.allowed else "refused",
        "host": attempt.host,
        "port": attempt.port,
        "method": attempt.method,
        "status": attempt.status,
        "bytes_to_hook": attempt.bytes_to_hook,
        "bytes_from_hook": attempt.bytes_from_hook,
        "proxy_result": attempt.result,
        "proxy_time": attempt.time,
        "client_address": attempt.client,
    }
    # the runs of the sandbox the connection came from: its network is its own
    there = book.live_at(attempt.client, attempt.time)
    sandbox: EgressSandboxFields | None = None
    latest = there[0] if there else book.latest_at(attempt.client, attempt.time)
    if latest is not None:
        sandbox = {
            "session": latest.run.session,
            "source": latest.run.source,
            "network": latest.network,
            "runs": [_run_view(g) for g in there],
        }
    if grant is not None and not attempt.refusal:
        _attributed(fields, grant)
        return fields
    if grant is not None:  # a real credential, refused outside its run: a reuse
        fields["refusal"] = attempt.refusal
        fields["attribution"] = (
            f"credential refused ({attempt.refusal}): it was issued to another run"
            if grant.user not in {g.user for g in there}
            else f"credential refused ({attempt.refusal})"
        )
        fields["credential_run"] = _run_view(grant)
        fields["used_from"] = sandbox
        fields["source"] = sandbox["source"] if sandbox else "unknown"
        fields["session"] = sandbox["session"] if sandbox else None
        return fields
    if attempt.refusal:
        fields["refusal"] = attempt.refusal
    if sandbox is not None:
        fields["source"], fields["session"] = sandbox["source"], sandbox["session"]
        fields["used_from"] = sandbox
        fields["attribution"] = (
            "no credential, or one this worker did not issue; attributed to the sandbox "
            "by its address"
        )
        if len(there) == 1:
            run = there[0].run
            fields["event"], fields["conversation_id"] = run.event, run.conversation_id
            fields["generation_id"], fields["hook_id"] = run.generation_id, run.hook_id
        return fields
    fields["source"] = "unknown"
    fields["attribution"] = (
        "none: no credential, or one this worker did not issue, from an address no "
        "sandbox of this worker held"
    )
    return fields
