"""Profiles and source kinds: which sources, hook types and events a run loads
(spec sections 2, 3 and 7)."""

from __future__ import annotations

from enum import StrEnum


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
