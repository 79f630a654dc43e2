"""What a source load is asked (`SourceSettings`) and what it gives (`LoadedSource`, with its
`SourceStatus`), and where the hooks files are by default."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from cloudrunner.protocol.claude_mapping import ClaudeOrigin
from cloudrunner.protocol.config import HookEntry, HooksFile
from cloudrunner.protocol.diagnostics import Diagnostic
from cloudrunner.protocol.profiles import Profile, SourceKind

#: the fleet's hooks, of cloudrunner's own: Cursor's enterprise file, /etc/cursor/hooks.json,
#: is on a cloud agent's VM the agent's file, whose hooks call the daemon
DEFAULT_ENTERPRISE_PATH = Path("/etc/cloudrunner/enterprise-hooks.json")
MAX_HOOKS_FILE_BYTES = 1024 * 1024
HOOKS_FILE_NAME = "hooks.json"


class SourceStatus(StrEnum):
    LOADED = "loaded"
    #: there is no file (or no source configured)
    ABSENT = "absent"
    #: not loaded by choice: the profile or the workspace trust excludes it
    SKIPPED = "skipped"
    #: the file exists but cannot be used (unreadable, refused, invalid)
    BROKEN = "broken"


@dataclass(frozen=True)
class SourceSettings:
    """Where the sources are and what loads. The worker builds this from its settings."""

    #: the repository root (None: no project source)
    workspace: Path | None = None
    profile: Profile = Profile.CLOUD
    #: None: the default DEFAULT_ENTERPRISE_PATH, whose absence is normal; a path given here
    #: is expected to exist, and its absence is an error diagnostic
    enterprise_path: Path | None = None
    #: the operator's managed hooks file, or a directory holding hooks.json
    team_path: Path | None = None
    #: the home whose ~/.cursor/hooks.json is the user source (None: the current user's)
    user_home: Path | None = None
    #: whether project hooks run (spec: the worker trusts the workspace it was given)
    trust_workspace: bool = True
    #: the source kinds the operator allows to load (managed-only mode: a subset)
    allowed: frozenset[SourceKind] = frozenset(SourceKind)
    #: approved digests of the project hooks (`cloudrunner hooks digest`); None: not pinned
    project_digests: frozenset[str] | None = None
    #: the operator's globs of more repository files the digest covers
    project_digest_paths: tuple[str, ...] = ()
    #: also load Claude Code's settings files (Cursor's "Third Party Hooks"; off by default)
    claude_code: bool = False


@dataclass(frozen=True)
class LoadedSource:
    kind: SourceKind
    #: the hooks file (as configured, not resolved); None when no source is configured
    path: Path | None
    #: where this source's hooks run
    working_dir: Path | None
    status: SourceStatus
    #: sha256 (hex) of the bytes loaded; None when nothing was read
    sha256: str | None
    #: the whole parsed file (None unless it parsed)
    config: HooksFile | None
    #: the hooks that run under the profile, per event in file order
    hooks: Mapping[str, tuple[HookEntry, ...]]
    diagnostics: tuple[Diagnostic, ...]
    #: a Claude Code settings file (kind project or user for trust, sandbox and policy)
    origin: ClaudeOrigin | None = None

    @property
    def priority(self) -> int:
        return self.rank

    @property
    def rank(self) -> int:
        """The place in the priority order: enterprise 0 ... user 3, then the Claude files."""
        return self.kind.priority if self.origin is None else self.origin.rank

    @property
    def name(self) -> str:
        """The source as records and messages name it (`project`, `claude-project`, ...)."""
        return (self.origin or self.kind).value

    @property
    def loaded(self) -> bool:
        return self.status is SourceStatus.LOADED


def not_loaded(
    kind: SourceKind, path: Path | None, status: SourceStatus, note: Diagnostic
) -> LoadedSource:
    return LoadedSource(kind, path, None, status, None, None, {}, (note,))
