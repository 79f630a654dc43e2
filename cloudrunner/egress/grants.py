"""The runs whose proxy credentials are live, shared by the worker processes of one state
directory and read by the proxy's run check.

Two files under `<state_dir>/egress/`, both changed under one lock (`grants.lock`):

- `conf/grants.json` (mounted read-only into the proxy): the live grants, user name ->
  the subnets its connections may come from and when it expires. A run's grant is removed
  when the run ends; an expired one is dropped on the next write, and the proxy's helper
  refuses it from its expiry on.
- `ledger.jsonl` (the worker's only): one line per credential issued, with the run it was
  for and its sandbox network, and one per run that ended, so that a record of a later
  attempt (a refused reuse, one without a credential) names the runs involved, even in
  another process.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: how long a grant's record stays in the ledger after its run was issued
KEEP_S = 3600.0
#: the ledger is compacted (lines older than KEEP_S dropped) when it grows past this
_LEDGER_MAX = 4 * 1024 * 1024
#: a grant outlives its run's timeout by this much (the hook's last request, then its end)
SLACK_S = 5.0


@dataclass(frozen=True)
class RunAttribution:
    """What a connection made with one run's credential is recorded against."""

    source: str
    event: str
    conversation_id: str
    generation_id: str
    hook_id: str
    command: str
    session: str = ""


@dataclass(frozen=True)
class Grant:
    """One credential as issued: its run, its sandbox network, and its lifetime."""

    user: str
    run: RunAttribution
    network: str
    subnets: tuple[str, ...]
    issued: float
    expires: float
    ended: float | None = None

    def live_at(self, when: float) -> bool:
        end = min(self.expires, self.ended) if self.ended is not None else self.expires
        return self.issued - 1.0 <= when <= end + 1.0

    def holds(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
            return any(ip in ipaddress.ip_network(s, strict=False) for s in self.subnets)
        except ValueError:
            return False


class GrantBook:
    """Issues, ends and looks up grants; thread-safe, and safe across processes."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "conf" / "grants.json"
        self.ledger = directory / "ledger.jsonl"
        self._lock_path = directory / "grants.lock"
        self._thread_lock = threading.Lock()
        self._known: dict[str, Grant] = {}
        self._offset = 0
        self._inode: int | None = None

    # ------------------------------------------------------------------ writing

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The lock every change of the grants (and of the sandbox networks) is made under."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._thread_lock:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def _read_live(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        grants = data.get("grants") if isinstance(data, dict) else None
        return grants if isinstance(grants, dict) else {}

    def _write_live(self, grants: dict[str, Any]) -> None:
        now = time.time()
        kept = {u: g for u, g in grants.items() if float(g.get("expires", 0)) > now}
        tmp = self.path.with_name(f".grants-{os.getpid()}-{threading.get_ident()}")
        tmp.write_text(json.dumps({"grants": kept}, sort_keys=True))
        os.chmod(tmp, 0o644)  # read by the proxy's helper (uid 13); the 0700 parent guards it
        os.replace(tmp, self.path)

    def _append(self, lines: Iterable[dict[str, Any]]) -> None:
        text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)
        fd = os.open(self.ledger, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, text.encode())
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > _LEDGER_MAX:
            self._compact()

    def _compact(self) -> None:
        cutoff = time.time() - KEEP_S
        kept = []
        with open(self.ledger, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                with contextlib.suppress(ValueError):
                    if float(json.loads(line).get("at", 0)) >= cutoff:
                        kept.append(line)
        tmp = self.ledger.with_name(f".ledger-{os.getpid()}")
        tmp.write_text("".join(kept))
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.ledger)

    def prepare(self) -> None:
        """An empty grants file when there is none (the proxy's helper reads it; called
        under `locked`)."""
        if not self.path.exists():
            self._write_live({})

    def live_on(self, subnets: Iterable[str]) -> bool:
        """Whether a live grant lies in these subnets (a network's; called under `locked`)."""
        wanted = [ipaddress.ip_network(s, strict=False) for s in subnets]
        now = time.time()
        for grant in self._read_live().values():
            if not isinstance(grant, dict) or float(grant.get("expires", 0)) <= now:
                continue
            for text in grant.get("subnets") or ():
                with contextlib.suppress(ValueError, TypeError):
                    if any(ipaddress.ip_network(text, strict=False).overlaps(w) for w in wanted):
                        return True
        return False

    def issue(self, grant: Grant) -> None:
        """Make `grant` live (the proxy accepts it from its subnets until it ends)."""
        with self.locked():
            live = self._read_live()
            live[grant.user] = {"subnets": list(grant.subnets), "expires": grant.expires}
            self._write_live(live)
            self._append([{"issue": _to_json(grant), "at": grant.issued}])
        with self._thread_lock:
            self._known[grant.user] = grant

    def narrow(self, user: str, subnet: str) -> None:
        """Make `user`'s live grant good from `subnet` only (its container's address)."""
        with self.locked():
            live = self._read_live()
            if user in live:
                live[user]["subnets"] = [subnet]
                self._write_live(live)

    def end(self, users: Iterable[str]) -> None:
        """End the runs of `users`: their credentials are refused from now on."""
        users = list(users)
        if not users:
            return
        now = time.time()
        with self.locked():
            live = self._read_live()
            for user in users:
                live.pop(user, None)
            self._write_live(live)
            self._append({"end": user, "at": now} for user in users)
        with self._thread_lock:
            for user in users:
                grant = self._known.get(user)
                if grant is not None:
                    self._known[user] = Grant(**{**_fields(grant), "ended": now})

    # ------------------------------------------------------------------ reading

    def _catch_up(self) -> None:
        """Read the ledger lines other processes appended since the last call."""
        try:
            with open(self.ledger, "rb") as fh:
                st = os.fstat(fh.fileno())
                if st.st_ino != self._inode or st.st_size < self._offset:
                    self._inode, self._offset = st.st_ino, 0
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self._offset += end
        for raw in data[:end].splitlines():
            try:
                line = json.loads(raw)
                if "issue" in line:
                    grant = _from_json(line["issue"])
                    self._known.setdefault(grant.user, grant)
                elif "end" in line and line["end"] in self._known:
                    found = self._known[line["end"]]
                    if found.ended is None:
                        self._known[found.user] = Grant(
                            **{**_fields(found), "ended": float(line["at"])}
                        )
            except (ValueError, KeyError, TypeError):
                continue  # a line this version does not know is skipped
        cutoff = time.time() - KEEP_S
        if len(self._known) > 8192:
            self._known = {u: g for u, g in self._known.items() if g.issued >= cutoff}

    def lookup(self, user: str) -> Grant | None:
        with self._thread_lock:
            found = self._known.get(user)
            if found is None or found.ended is None:
                self._catch_up()
                found = self._known.get(user)
            return found

    def live_at(self, address: str, when: float) -> list[Grant]:
        """The grants whose sandbox network holds `address` and whose run was live at `when`
        (the runs of the sandbox an attempt came from)."""
        with self._thread_lock:
            self._catch_up()
            return [g for g in self._known.values() if g.live_at(when) and g.holds(address)]

    def latest_at(self, address: str, when: float) -> Grant | None:
        """The last grant issued before `when` on a sandbox network that holds `address`
        (which session and source that network was for, when no run of it was live)."""
        with self._thread_lock:
            self._catch_up()
            found = [g for g in self._known.values() if g.issued <= when + 1.0 and g.holds(address)]
        return max(found, key=lambda g: g.issued, default=None)


def _fields(grant: Grant) -> dict[str, Any]:
    return {f: getattr(grant, f) for f in grant.__dataclass_fields__}


def _to_json(grant: Grant) -> dict[str, Any]:
    out = asdict(grant)
    out["subnets"] = list(grant.subnets)
    return out


def _from_json(data: dict[str, Any]) -> Grant:
    return Grant(
        user=str(data["user"]),
        run=RunAttribution(**data["run"]),
        network=str(data["network"]),
        subnets=tuple(str(s) for s in data["subnets"]),
        issued=float(data["issued"]),
        expires=float(data["expires"]),
        ended=None if data.get("ended") is None else float(data["ended"]),
    )
