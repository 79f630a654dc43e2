"""Loading a worker's hook sources (spec section 2), as a `SourceSet`.

A `Profile` decides what loads: `cloud` (enterprise, team, project; command hooks; the 14
cloud events) or `desktop` (all four sources and all 21 events; prompt hooks kept so each
event can report them as not executable). Everything left out is a diagnostic with a reason.
A broken file disables its own source only. Each loaded source carries its priority, the
working directory of its hooks and the sha256 of the bytes it loaded. Each kind loads
through its loader (`kinds.LOADERS`); a file's load is remembered by its identity
(`files`), and a whole set by every glance its loaders took (`load_sources`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from cloudrunner.memo import BoundedMemo
from cloudrunner.protocol.diagnostics import Diagnostic
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sources.files import LoadGuard, Observation, forget_loaded_files, watched
from cloudrunner.sources.kinds import LOADERS
from cloudrunner.sources.loaded import LoadedSource, SourceSettings

#: SourceSettings -> (what its load looked at, and saw; the set it made)
_sets: BoundedMemo[SourceSettings, tuple[tuple[Observation, ...], SourceSet]] = BoundedMemo()


def forget_loaded_sources() -> None:
    """Drop every remembered load (tests; a worker never needs to)."""
    forget_loaded_files()
    _sets.clear()


@dataclass(frozen=True)
class SourceSet:
    settings: SourceSettings
    #: all four kinds, highest priority first
    sources: tuple[LoadedSource, ...]
    #: the kinds whose content (or status) changed in the reload that made this set
    changed: tuple[SourceKind, ...] = ()

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        return tuple(d for s in self.sources for d in s.diagnostics)

    @property
    def loaded(self) -> tuple[LoadedSource, ...]:
        return tuple(s for s in self.sources if s.loaded)

    def source(self, kind: SourceKind) -> LoadedSource:
        return next(s for s in self.sources if s.kind is kind)

    def reload(self) -> SourceSet:
        """The sources loaded again with the same settings, as the next event would load
        them (`load_sources`: a file whose identity did not change is not read again).
        `changed` names the kinds whose content or status differs from this set's (a file
        that appeared, vanished or was edited); a source that came back equal is this
        set's own object."""
        before = {(s.kind, s.origin): s for s in self.sources}
        kept: list[LoadedSource] = []
        changed: list[SourceKind] = []
        for new in load_sources(self.settings).sources:
            old = before.pop((new.kind, new.origin), None)
            kept.append(old if old == new else new)
            if old is None or (old.sha256, old.status) != (new.sha256, new.status):
                changed.append(new.kind)
        # a Claude Code file that is no longer there to say anything about
        changed.extend(old.kind for old in before.values())
        return SourceSet(self.settings, tuple(kept), tuple(dict.fromkeys(changed)))


def load_sources(settings: SourceSettings) -> SourceSet:
    """Load all four sources under the settings' profile, and the Claude Code files below them
    when `claude_code` is on (or found while it is off, to say so). Never raises for bad
    files.

    A daemon loads the sources on every event and they almost never change, so the set is
    remembered with every glance its loaders took at the file system (each file's
    `LoadGuard`, the real paths of the operator's hooks and of the workspace, whether a
    file or directory is there, the home directory) and what each saw: when every glance
    sees the same again, the remembered set is the answer, without the loaders' work. A
    set is not remembered when a file of it is not settled (`RACY_NS`) or the project is
    pinned (its digest covers the scripts, which no glance watches)."""
    remembered = _sets.get(settings)
    if remembered is not None and all(look(*args) == seen for look, args, seen in remembered[0]):
        return remembered[1]
    with watched() as notes:
        loaded = _load_all(settings)
    now = time.time_ns()
    if settings.project_digests is None and all(
        not isinstance(seen, LoadGuard) or seen.settled(now) for _, _, seen in notes
    ):
        _sets.put(settings, (tuple(notes), loaded))
    return loaded


def _load_all(settings: SourceSettings) -> SourceSet:
    return SourceSet(settings, tuple(s for loader in LOADERS for s in loader.load(settings)))
