"""The team source: the operator's managed hooks file, or a directory holding hooks.json."""

from __future__ import annotations

import os

from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import info
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sources.files import load_file, seen
from cloudrunner.sources.loaded import (
    HOOKS_FILE_NAME,
    LoadedSource,
    SourceSettings,
    SourceStatus,
    not_loaded,
)
from cloudrunner.sources.loader import managed_refusal, not_allowed

KIND = SourceKind.TEAM


def load(settings: SourceSettings) -> tuple[LoadedSource, ...]:
    if KIND not in settings.allowed:
        return (not_allowed(KIND, settings),)
    return (_team(settings),)


def _team(settings: SourceSettings) -> LoadedSource:
    given = settings.team_path
    if given is None:
        return not_loaded(
            KIND,
            None,
            SourceStatus.ABSENT,
            info(
                DiagnosticCode.SOURCE_ABSENT,
                "no team hooks configured (the operator gives a managed hooks file or directory)",
            ),
        )
    refused = managed_refusal(KIND, given, settings)
    if refused is not None:
        return refused
    if seen(os.path.isdir, given):
        file = given / HOOKS_FILE_NAME
        return load_file(KIND, file, given, given, settings.profile, required=True)
    return load_file(KIND, given, given.parent, given.parent, settings.profile, required=True)
