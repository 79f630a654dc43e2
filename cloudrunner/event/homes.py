"""Each source's HOME for an event, made and measured before its hooks run (see
`hook_home`), with what was prepared a moment ago kept."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cloudrunner import workspace
from cloudrunner.errors import CloudrunnerError
from cloudrunner.event import hook_home
from cloudrunner.event.sandbox_profiles import SandboxProfiles
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.settings import HomeSettings


@dataclass(frozen=True)
class Home:
    """A source's HOME for one event: where (None: the image's), what the record says, and
    the error that stops the source's hooks (over its size limit)."""

    path: Path | None
    view: dict[str, object]
    error: CloudrunnerError | None = None


class Homes:
    def __init__(self, settings: HomeSettings, profiles: SandboxProfiles, root: Path) -> None:
        self.settings = settings
        self.profiles = profiles
        self.root = root
        #: each home's last preparation (monotonic time, the directory's inode, its result):
        #: within measure_interval_s it is not made, written or measured again
        self._ready: dict[Path, tuple[float, int, Home]] = {}
        self._dirs: dict[tuple[Path, SourceKind], Path] = {}

    def prepare(
        self, ws: workspace.Workspace, kinds: Iterable[SourceKind]
    ) -> dict[SourceKind, Home]:
        if not self.settings.enabled:
            return {}
        settings = self.settings
        out: dict[SourceKind, Home] = {}
        now = time.monotonic()
        for kind in set(kinds):
            path = self._dirs.get((ws.root, kind))
            if path is None:
                path = hook_home.home_dir(self.root, ws.root, kind)
                self._dirs[(ws.root, kind)] = path
            ready = self._ready.get(path)
            if ready is not None and now - ready[0] < settings.measure_interval_s:
                # prepared a moment ago: the same directory (not removed and made anew)
                # needs no mkdir, .gitconfig or measuring yet
                try:
                    same = os.lstat(path).st_ino == ready[1]
                except OSError:
                    same = False
                if same:
                    out[kind] = ready[2]
                    continue
            try:
                uid, gid = self.profiles.identity(kind, ws.root)
                status = hook_home.prepare(
                    path, uid, gid, workspace=ws.root, limit=settings.max_bytes,
                    git_name=settings.git_user_name, git_email=settings.git_user_email,
                )  # fmt: skip
            except hook_home.HomeUnavailable as exc:
                # hooks keep the image's HOME, and the record says why
                out[kind] = Home(None, {"path": None, "reason": exc.message})
                continue
            except CloudrunnerError as exc:
                out[kind] = Home(path, {"path": str(path), "error": exc.message}, exc)
                continue
            out[kind] = home = Home(path, status.to_dict())
            with contextlib.suppress(OSError):
                self._ready[path] = (now, os.lstat(path).st_ino, home)
        return out
