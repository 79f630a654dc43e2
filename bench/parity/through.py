"""One event through cloudrunner as a cloud agent VM sends it: `cloudrunner serve` (warm
`session` isolation, the default hook image, the cloud profile, no enterprise or team hooks)
and one `cloudrunner hook EVENT` client process with the payload on stdin. The hook runs'
exit codes and outcomes come from the daemon's audit records.

Each event gets its own daemon and state directory, as each bare run had a fresh HOME and
no memory of earlier events (loop budgets and source hashes are per conversation, and the
events of one repository share a conversation id).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from bench.daemon import cloudrunner_command, compiled_client
from bench.parity.compare import WorkspaceFacts
from bench.waiting import came_true
from cloudrunner import client


class DaemonFailed(Exception):
    pass


@dataclass(frozen=True)
class ClientCall:
    exit_code: int
    answer: dict[str, Any] | None
    stderr: str
    wall_ms: float


@dataclass
class AuditedHook:
    index: int
    command: str
    matched: bool
    exit_code: int | None
    outcome: str
    reason: str
    stderr: str
    stdout: str


@dataclass
class Daemon:
    """`cloudrunner serve` for one event; use as a context manager."""

    base: Path
    worker_id: str
    runtime: str
    profile: str = "cloud"
    #: "installed" (the command as installed), "isolated" (`python -IS` that file) or
    #: "compiled" (`cloudrunner-hook`, the Go client beside it)
    client: str = "installed"
    proc: subprocess.Popen[bytes] | None = None
    log: list[str] = field(default_factory=list)

    @property
    def state(self) -> Path:
        return self.base / "state"

    @property
    def socket(self) -> Path:
        return self.state / "cr.sock"

    @property
    def audit_log(self) -> Path:
        return self.state / "audit.log"

    def settings(self) -> dict[str, Any]:
        enterprise = self.base / "enterprise-hooks.json"
        enterprise.write_text('{"version": 1, "hooks": {}}\n')
        enterprise.chmod(0o644)
        return {
            "profile": self.profile,
            "state_dir": str(self.state),
            "worker_id": self.worker_id,
            "sources": {"enterprise_hooks": str(enterprise)},
            "sandbox": {"isolation": "session", "runtime": self.runtime},
            "server": {"socket": str(self.socket)},
        }

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
        return {**keep, "CLOUDRUNNER_CONFIG": str(self.base / "cloudrunner.toml")}

    def __enter__(self) -> Daemon:
        self.state.mkdir(parents=True)
        (self.base / "cloudrunner.toml").write_text(tomli_w.dumps(self.settings()))
        self._stderr = open(self.base / "serve.log", "wb")  # closed in _close()
        self.proc = subprocess.Popen(
            [*cloudrunner_command(), "serve"],
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
        )
        endpoint = client.Endpoint(str(self.socket))
        proc = self.proc

        def answers() -> bool:
            if proc.poll() is not None:
                self._close()
                raise DaemonFailed(f"cloudrunner serve exited: {self.log_tail()}")
            try:
                return client.request(endpoint, "GET", "/healthz", timeout_s=5).status == 200
            except client.Unreachable:
                return False

        if not came_true(answers, timeout_s=60, interval_s=0.05):
            self._close()
            raise DaemonFailed(f"cloudrunner serve did not answer: {self.log_tail()}")
        return self

    def log_tail(self) -> str:
        try:
            text = (self.base / "serve.log").read_text(errors="replace").strip()
        except OSError:
            return "(no log)"
        return text.splitlines()[-1] if text else "(empty log)"

    def _close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # drains, closes its warm sandboxes
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()

    def __exit__(self, *exc: object) -> None:
        self._close()

    def send(self, event: str, payload: bytes) -> ClientCall:
        """One `cloudrunner hook EVENT` process; its wall time includes its start-up."""
        keep = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
        env = {**keep, "CLOUDRUNNER_SOCKET": str(self.socket)}
        command = cloudrunner_command()
        if self.client == "isolated" and len(command) == 1:
            command = [sys.executable, "-IS", command[0]]
        elif self.client == "compiled":
            command = [str(compiled_client())]
        start = time.perf_counter()
        proc = subprocess.run(
            [*command, "hook", event],
            input=payload,
            env=env,
            capture_output=True,
            timeout=300,
            check=False,
        )
        wall = (time.perf_counter() - start) * 1000
        try:
            answer = json.loads(proc.stdout) if proc.stdout.strip() else None
        except ValueError:
            answer = None
        if answer is not None and not isinstance(answer, dict):
            answer = None
        return ClientCall(proc.returncode, answer, proc.stderr.decode(errors="replace"), wall)

    def records(self, generation_id: str) -> list[dict[str, Any]]:
        """The audit records of one event (by generation id)."""
        out = []
        try:
            lines = self.audit_log.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("generation_id") == generation_id:
                out.append(record)
        return out


def audited_hooks(records: list[dict[str, Any]]) -> list[AuditedHook]:
    """The hook records of one event's first answer, in file order (project source)."""
    out: list[AuditedHook] = []
    seen: set[int] = set()
    for record in records:
        if record.get("kind") == "decision" and out:
            break  # a later repeat of the same event
        if record.get("kind") != "hook" or record.get("source") != "project":
            continue
        index = int(record.get("hook_index", -1))
        if index in seen:
            continue
        seen.add(index)
        out.append(
            AuditedHook(
                index=index,
                command=str(record.get("command") or ""),
                matched=bool(record.get("matched")),
                exit_code=record.get("exit_code"),
                outcome=str(record.get("outcome") or ""),
                reason=str(record.get("reason") or ""),
                stderr=str(record.get("stderr_excerpt") or ""),
                stdout=str(record.get("stdout_excerpt") or ""),
            )
        )
    return sorted(out, key=lambda h: h.index)


def hook_durations_ms(records: list[dict[str, Any]]) -> list[float]:
    """Per answer of the event (the first and each repeat), the summed `duration_ms` of its
    hook runs as the daemon measured them: the hooks' own time in the sandbox, without the
    client, the HTTP round trip and the daemon's work around them."""
    out: list[float] = []
    total = 0.0
    for record in records:
        if record.get("kind") == "hook" and isinstance(record.get("duration_ms"), int | float):
            total += float(record["duration_ms"])
        elif record.get("kind") == "decision":
            out.append(total)
            total = 0.0
    return out


def hook_identity(records: list[dict[str, Any]]) -> tuple[int, int] | None:
    """The uid:gid the event's hooks ran as, from the attestation of its hook records."""
    for record in records:
        attestation = record.get("attestation")
        user = attestation.get("hook_user") if isinstance(attestation, dict) else None
        if isinstance(user, str) and ":" in user:
            uid, _, gid = user.partition(":")
            if uid.isdigit() and gid.isdigit():
                return int(uid), int(gid)
    return None


def workspace_facts(root: Path, identity: tuple[int, int] | None) -> WorkspaceFacts:
    """The workspace root's owner and mode, and whether the hook uid can write it: `test -w`
    run as that uid and gid (setpriv, no supplementary groups), so ACLs count."""
    st = root.stat()
    writable = None
    if identity is not None:
        uid, gid = identity
        probe = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
             "test", "-w", str(root)],
            capture_output=True, check=False,
        )  # fmt: skip
        writable = probe.returncode == 0 if probe.returncode in (0, 1) else None
    return WorkspaceFacts(st.st_uid, st.st_mode & 0o7777, identity[0] if identity else None,
                          writable)  # fmt: skip


def other_records(records: list[dict[str, Any]]) -> list[str]:
    """Refused and gated records of the event, and skipped ones of the sources it runs
    (not the user source, which the cloud profile leaves out by design): one line each."""
    return [
        f"{r.get('kind')}: {r.get('reason')}"
        for r in records
        if r.get("kind") in ("refused", "gated")
        or (r.get("kind") == "skipped" and r.get("source") != "user")
    ]
