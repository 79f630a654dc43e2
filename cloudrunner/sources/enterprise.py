"""The enterprise source: the operator's fleet-wide hooks file (`--enterprise-hooks`, by
default `/etc/cloudrunner/enterprise-hooks.json`), the highest priority."""

from __future__ import annotations

from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sources.files import load_file
from cloudrunner.sources.loaded import DEFAULT_ENTERPRISE_PATH, LoadedSource, SourceSettings
from cloudrunner.sources.loader import managed_refusal, not_allowed

KIND = SourceKind.ENTERPRISE


def load(settings: SourceSettings) -> tuple[LoadedSource, ...]:
    if KIND not in settings.allowed:
        return (not_allowed(KIND, settings),)
    # A missing enterprise file, default or configured, means "no enterprise hooks" (the
    # `--enterprise-hooks` contract): machines without a managed policy are normal.
    path = settings.enterprise_path or DEFAULT_ENTERPRISE_PATH
    refused = managed_refusal(KIND, path, settings)
    if refused is not None:
        return (refused,)
    return (load_file(KIND, path, path.parent, path.parent, settings.profile, required=False),)
