"""The hook sources a worker's settings load, as `SourceSettings`: one place for the worker
(each event) and `cloudrunner vm` (which sizes the agent's configuration from the same
sources)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.sources.loaded import SourceSettings

if TYPE_CHECKING:  # the settings import this package (pinning checks their globs)
    from cloudrunner.settings import Settings


def source_settings(settings: Settings, root: Path | None, trusted: bool = True) -> SourceSettings:
    """The sources of `settings` for the workspace `root` (None: the operator's alone);
    `trusted` False when the workspace's own trust withholds its project hooks."""
    sources = settings.sources
    digests = sources.project_digests
    return SourceSettings(
        workspace=root,
        profile=Profile(settings.profile),
        enterprise_path=sources.enterprise_hooks,
        team_path=sources.team_hooks,
        user_home=sources.user_home,
        trust_workspace=sources.trust_project_hooks and trusted,
        allowed=frozenset(SourceKind(k) for k in sources.allowed),
        project_digests=None if digests is None else frozenset(digests),
        project_digest_paths=tuple(sources.project_digest_paths),
        claude_code=sources.claude_code,
    )
