"""The workspaces a worker serves: cloned, adopted or handed over, their ACL grants and
the gate's cache of writable checkouts. Each check raises `Refusal`; the pipeline records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cloudrunner import workspace
from cloudrunner.errors import CloudrunnerError
from cloudrunner.event import gate
from cloudrunner.event.sandbox_profiles import SandboxProfiles
from cloudrunner.event.stage_errors import Refusal
from cloudrunner.logs import get_logger
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.refusals import ErrorCode
from cloudrunner.settings import Settings
from cloudrunner.workspace import match as workspace_match
from cloudrunner.workspace import ownership

_log = get_logger("cloudrunner.worker")


class Workspaces:
    def __init__(self, settings: Settings, profiles: SandboxProfiles, gate_dir: Path) -> None:
        self.settings = settings
        self.profiles = profiles
        self.gate_dir = gate_dir
        #: one checkout per configured workspace, else per payload workspace roots
        self._workspaces: dict[str, workspace.Workspace] = {}
        #: workspaces a probe found writable, with the gate generation it was under
        self._writable: dict[Path, int] = {}
        #: how hooks got the owner's access to each workspace (once per worker)
        self._access: dict[Path, ownership.AccessReport] = {}

    def all(self) -> list[workspace.Workspace]:
        return list(self._workspaces.values())

    def access(self, root: Path) -> ownership.AccessReport | None:
        return self._access.get(root)

    # ------------------------------------------------------------------ stages

    def other_workspace(self, document: Mapping[str, Any]) -> bool:
        """Refuse an event naming another workspace than the configured one (hooks act on
        the agent's tree only); True when the payload names none (the rules:
        cloudrunner/workspace/match.py, `check_roots`)."""
        configured = self.configured_root()
        if configured is None or not configured.is_absolute():
            return False  # a relative --workspace is refused when it is resolved
        check = workspace_match.check_roots(configured, document.get("workspace_roots"))
        if check.code is not None:
            raise Refusal(check.reason, check.code)
        return check.absent

    def gate_before_clone(self) -> gate.GateDecision | None:
        """With --repo and --workspace DIR, DIR not cloned yet and not writable: the held
        gate's decision on DIR (nothing is cloned until it is writable), else None."""
        cfg = self.settings.workspace
        dest = cfg.path
        if not cfg.repo or dest is None or not dest.is_absolute() or "" in self._workspaces:
            return None
        with locked(self._clone_lock(dest)):  # not while another thread clones into it
            if not dest.is_dir() or (dest / ".git").exists():
                return None
            decision = self.gate(dest)
        return None if decision.open else decision

    def resolve(self, document: Mapping[str, Any]) -> workspace.Workspace:
        """The event's checkout, with the commit checked out now."""
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
                raise Refusal(exc.message, ErrorCode.WORKSPACE_UNAVAILABLE) from exc
            return _current(found)
        try:
            ws = self._checkout(document)
        except CloudrunnerError as exc:
            raise Refusal(exc.message, ErrorCode.WORKSPACE_UNAVAILABLE) from exc
        self._workspaces[key] = ws
        return _current(ws)

    def grant_access(self, ws: workspace.Workspace) -> ownership.AccessReport | None:
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
            report = ownership.grant_workspace(ws.root, self.profiles.hook_uids(ws.root))
        except CloudrunnerError as exc:
            raise Refusal(exc.message, ErrorCode.WORKSPACE_UNAVAILABLE) from exc
        if report.mechanism != "deferred":
            self._access[ws.root] = report
        return report

    def gate(self, root: Path) -> gate.GateDecision:
        """The gate's decision; once a probe found `root` writable, it is not probed again
        while the gate's generation stays the same (see gate.evaluate). The probe writes as
        the project hooks' uid, as they would."""
        seen = self._writable.get(root)
        as_user = self.profiles.probe_user(root)
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

    # ------------------------------------------------------------------ checkouts

    def configured_root(self) -> Path | None:
        """The directory a worker with a configured workspace serves (None without one)."""
        cfg = self.settings.workspace
        return self.clone_dest() if cfg.repo else cfg.path

    def clone_dest(self) -> Path:
        """Where the configured repository is cloned."""
        cfg = self.settings.workspace
        key = hashlib.sha256(f"{cfg.repo}\n{cfg.ref}".encode()).hexdigest()[:16]
        return cfg.path or self.settings.clone_dir / key

    def startup(self) -> tuple[Path | None, bool]:
        """The configured workspace's root and trust when it is a checkout already there
        (nothing cloned), else (None, True)."""
        cfg = self.settings.workspace
        path = self.configured_root()
        if path is not None and path.is_absolute() and (not cfg.repo or (path / ".git").exists()):
            try:
                ws = workspace.adopt(
                    path, trust_project_hooks=self.settings.sources.trust_project_hooks
                )
            except CloudrunnerError as exc:
                # The daemon still starts (the checkout may be fixed while it runs); each
                # event refuses with this problem and records it until then.
                _log.warning(
                    "worker.workspace_unusable_at_start", path=str(path), problem=exc.message
                )
            else:
                return ws.root, ws.trust_project_hooks
        return None, True

    def _clone_lock(self, dest: Path) -> Path:
        """The lock of a clone into `dest`, in the state directory: DIR's parent may be
        read-only (a volume mounted at /workspace in a container with a read-only root)."""
        digest = hashlib.sha256(str(dest).encode()).hexdigest()[:16]
        return self.settings.clone_dir / f".{digest}.lock"

    def _checkout(self, document: Mapping[str, Any]) -> workspace.Workspace:
        cfg = self.settings.workspace
        trust = self.settings.sources.trust_project_hooks
        if cfg.path is not None and not cfg.path.is_absolute():
            raise workspace.WorkspaceError(
                f"the workspace path {str(cfg.path)!r} (--workspace, workspace.path) is "
                f'relative; give an absolute path (for example --workspace "$PWD/{cfg.path}")'
            )
        if cfg.repo:
            dest = self.clone_dest()
            with locked(self._clone_lock(dest)):
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

    def _hand_over(self, root: Path) -> None:
        """A clone this worker made as root belongs to the unprivileged hook uid, so hooks
        (which never run as uid 0) can write the workspace they act on, under every
        runtime (gVisor ignores the host's ACLs). Nothing else owns a fresh clone and no
        hook has run in it yet. Adopted checkouts keep their owner (see `ownership`)."""
        if os.geteuid() != 0:
            return
        uid, gid = self.profiles.identity(SourceKind.PROJECT, root)
        for directory, dirs, files in os.walk(root):
            os.lchown(directory, uid, gid)
            for entry in (*dirs, *files):
                os.lchown(os.path.join(directory, entry), uid, gid)


def _current(ws: workspace.Workspace) -> workspace.Workspace:
    """`ws` with the commit checked out now (a long-lived worker outlives commits)."""
    commit = workspace.head_commit(ws)
    return ws if commit == ws.commit else dataclasses.replace(ws, commit=commit)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (several `run`s may want the same clone)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
