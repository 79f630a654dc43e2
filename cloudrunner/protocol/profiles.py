"""Profiles and source kinds: which sources, hook types and events a run loads
(spec sections 2, 3 and 7)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args


class Profile(StrEnum):
    #: what a cloud agent loads: enterprise, team and project command hooks, the 14 cloud events
    CLOUD = "cloud"
    #: what the desktop app loads: all four sources and all 21 events (prompt hooks still
    #: cannot run here: cloudrunner has no LLM to ask, so they are reported as skipped)
    DESKTOP = "desktop"

    def runs_event(self, in_cloud: bool) -> bool:
        return self is Profile.DESKTOP or in_cloud

    @property
    def loads_user_hooks(self) -> bool:
        return self is Profile.DESKTOP

    @property
    def loads_prompt_hooks(self) -> bool:
        """Whether prompt hooks are kept at load time (to be reported per event, not run)."""
        return self is Profile.DESKTOP


class SourceKind(StrEnum):
    """The four hook sources of spec section 2, highest priority first."""

    ENTERPRISE = "enterprise"
    TEAM = "team"
    PROJECT = "project"
    USER = "user"

    @property
    def priority(self) -> int:
        """0 is the highest priority (enterprise), 3 the lowest (user)."""
        return list(SourceKind).index(self)

    @property
    def managed(self) -> bool:
        """Enterprise and team hooks: the operator's, loaded from files outside the
        repository (read-only, no network unless the operator grants it)."""
        return self in MANAGED_SOURCES


#: the operator-managed sources, and the others (the repository's and the user's)
MANAGED_SOURCES: frozenset[SourceKind] = frozenset({SourceKind.ENTERPRISE, SourceKind.TEAM})
UNMANAGED_SOURCES: frozenset[SourceKind] = frozenset(SourceKind) - MANAGED_SOURCES

#: the source kinds' names as a type, for settings and models that validate plain strings
#: (the same four as SourceKind, in its order: checked below)
SourceKindName = Literal["enterprise", "team", "project", "user"]
#: every source kind's name, highest priority first
SOURCE_NAMES: tuple[SourceKindName, ...] = get_args(SourceKindName)
if tuple(SourceKind) != SOURCE_NAMES:  # pragma: no cover - a change to one but not the other
    raise AssertionError("SourceKindName and SourceKind name different sources")
#: the managed sources' names, in priority order
MANAGED_NAMES: tuple[SourceKindName, ...] = tuple(
    name for name in SOURCE_NAMES if SourceKind(name) in MANAGED_SOURCES
)
