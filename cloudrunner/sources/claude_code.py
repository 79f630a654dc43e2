"""Claude Code's settings files (Cursor's "Third Party Hooks", `sources.claude_code`):
`.claude/settings.local.json` and `.claude/settings.json` of the workspace, loaded as
project sources, and `~/.claude/settings.json`, a user source; below Cursor's four, in
`ClaudeOrigin`'s order."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from cloudrunner.protocol.claude_mapping import ClaudeOrigin
from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import Diagnostic, info
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sources.files import home, load_file, seen
from cloudrunner.sources.loaded import LoadedSource, SourceSettings, SourceStatus, not_loaded
from cloudrunner.sources.loader import not_allowed
from cloudrunner.sources.project import pinned


def load(settings: SourceSettings) -> tuple[LoadedSource, ...]:
    return tuple(c for o in ClaudeOrigin if (c := _claude(settings, o)) is not None)


def _claude_skipped(
    kind: SourceKind, path: Path, origin: ClaudeOrigin, note: Diagnostic
) -> LoadedSource:
    return replace(not_loaded(kind, path, SourceStatus.SKIPPED, note), origin=origin)


def _claude_project(settings: SourceSettings, origin: ClaudeOrigin) -> LoadedSource | None:
    """`.claude/settings.local.json` or `.claude/settings.json` of the workspace: project
    sources for trust, managed-only mode and pinning; None when there is nothing to say."""
    workspace = settings.workspace
    if workspace is None:
        return None
    path = workspace / origin.relative
    if not settings.claude_code:
        if not seen(os.path.lexists, path):
            return None
        note = info(
            DiagnosticCode.CLAUDE_CODE_OFF,
            f"{path} holds Claude Code settings and is not loaded: sources.claude_code is off "
            "(turn it on to run its hooks, as Cursor's Third Party Hooks setting does)",
            file=str(path),
        )
        return _claude_skipped(SourceKind.PROJECT, path, origin, note)
    if SourceKind.PROJECT not in settings.allowed:
        return replace(not_allowed(SourceKind.PROJECT, settings, origin=origin), path=path)
    if not settings.trust_workspace:
        note = info(
            DiagnosticCode.UNTRUSTED_WORKSPACE,
            f"workspace {workspace} is not trusted, so its Claude Code hooks are not loaded",
            file=str(path),
        )
        return _claude_skipped(SourceKind.PROJECT, path, origin, note)
    loaded = load_file(
        SourceKind.PROJECT, path, workspace, workspace, settings.profile, required=False,
        origin=origin,
    )  # fmt: skip
    if settings.project_digests is None or loaded.status is not SourceStatus.LOADED:
        return loaded
    return pinned(loaded, workspace, settings.project_digests, settings.project_digest_paths)


def _claude_user(settings: SourceSettings) -> LoadedSource | None:
    """`~/.claude/settings.json`: a user source (not loaded in the cloud profile)."""
    if not settings.claude_code:
        return None
    origin = ClaudeOrigin.USER
    user_home = settings.user_home or seen(home)
    directory = user_home / ".claude"
    path = user_home / origin.relative
    if not settings.profile.loads_user_hooks:
        note = info(
            DiagnosticCode.SOURCE_SKIPPED,
            "Claude Code user hooks are not loaded in the cloud profile "
            "(a cloud VM has no user home config)",
            file=str(path),
        )
        return _claude_skipped(SourceKind.USER, path, origin, note)
    if SourceKind.USER not in settings.allowed:
        return replace(not_allowed(SourceKind.USER, settings, origin=origin), path=path)
    working_dir = settings.workspace or directory
    return load_file(
        SourceKind.USER, path, directory, working_dir, settings.profile, required=False,
        origin=origin,
    )  # fmt: skip


def _claude(settings: SourceSettings, origin: ClaudeOrigin) -> LoadedSource | None:
    if origin is ClaudeOrigin.USER:
        return _claude_user(settings)
    return _claude_project(settings, origin)
