"""The user source: `~/.cursor/hooks.json` (desktop profile only; a cloud VM has no user
home config)."""

from __future__ import annotations

from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import info
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sources.files import home, load_file, seen
from cloudrunner.sources.loaded import (
    HOOKS_FILE_NAME,
    LoadedSource,
    SourceSettings,
    SourceStatus,
    not_loaded,
)
from cloudrunner.sources.loader import not_allowed

KIND = SourceKind.USER


def load(settings: SourceSettings) -> tuple[LoadedSource, ...]:
    if KIND not in settings.allowed:
        return (not_allowed(KIND, settings),)
    return (_user(settings),)


def _user(settings: SourceSettings) -> LoadedSource:
    directory = (settings.user_home or seen(home)) / ".cursor"
    path = directory / HOOKS_FILE_NAME
    if not settings.profile.loads_user_hooks:
        return not_loaded(
            KIND,
            path,
            SourceStatus.SKIPPED,
            info(
                DiagnosticCode.SOURCE_SKIPPED,
                "user hooks are not loaded in the cloud profile "
                "(a cloud VM has no user home config)",
                file=str(path),
            ),
        )
    return load_file(KIND, path, directory, directory, settings.profile, required=False)
