"""The project source: the repository's `.cursor/hooks.json`, loaded when the workspace is
trusted, and when the operator pins project hooks only if their digest (`pinning`) is
approved."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path

from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import error, info
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sources import files
from cloudrunner.sources.files import HooksFileRefused, load_file
from cloudrunner.sources.loaded import (
    HOOKS_FILE_NAME,
    LoadedSource,
    SourceSettings,
    SourceStatus,
    not_loaded,
)
from cloudrunner.sources.loader import not_allowed

KIND = SourceKind.PROJECT


def load(settings: SourceSettings) -> tuple[LoadedSource, ...]:
    if KIND not in settings.allowed:
        return (not_allowed(KIND, settings),)
    return (_project(settings),)


def _project(settings: SourceSettings) -> LoadedSource:
    workspace = settings.workspace
    if workspace is None:
        return not_loaded(
            KIND,
            None,
            SourceStatus.ABSENT,
            info(DiagnosticCode.SOURCE_ABSENT, "no workspace given, so there are no project hooks"),
        )
    path = workspace / ".cursor" / HOOKS_FILE_NAME
    if not settings.trust_workspace:
        return not_loaded(
            KIND,
            path,
            SourceStatus.SKIPPED,
            info(
                DiagnosticCode.UNTRUSTED_WORKSPACE,
                f"workspace {workspace} is not trusted, so its project hooks are not loaded",
                file=str(path),
            ),
        )
    loaded = load_file(KIND, path, workspace, workspace, settings.profile, required=False)
    if settings.project_digests is None or loaded.status is not SourceStatus.LOADED:
        return loaded
    return pinned(loaded, workspace, settings.project_digests, settings.project_digest_paths)


def pinned(
    loaded: LoadedSource, workspace: Path, approved: frozenset[str], extra: tuple[str, ...]
) -> LoadedSource:
    """The project source if the digest of its hooks (the file and the scripts it names)
    is approved; otherwise not loaded, with the digest to approve."""
    from cloudrunner.sources import pinning

    assert loaded.path is not None
    file = str(loaded.path)
    try:
        data = files.read_hooks_bytes(loaded.path, workspace)
        if hashlib.sha256(data).hexdigest() != loaded.sha256:
            raise pinning.DigestError(f"{file} changed while its digest was taken")
        relative = os.path.relpath(loaded.path, workspace)
        computed = pinning.compute(workspace, data, relative, extra_paths=extra)
        digest = computed.digest
    except (OSError, HooksFileRefused, pinning.DigestError) as exc:
        note = error(
            DiagnosticCode.PROJECT_DIGEST_FAILED,
            f"the project hooks are pinned and their digest cannot be taken ({exc}); "
            "they are not loaded",
            file=file,
        )
        return replace(loaded, status=SourceStatus.SKIPPED, hooks={}, diagnostics=(note,))
    # The source's version is the digest from here on (it is what a conversation has seen
    # and what records name), so a changed script counts as a new version of the source.
    version = digest.removeprefix(pinning.DIGEST_PREFIX)
    if not computed.approvable:  # fails closed: what it may run is not all covered
        note = error(
            DiagnosticCode.PROJECT_DIGEST_UNCOVERED,
            "the project hooks are pinned and cannot be approved by their digest: "
            + "; ".join(hook.describe() for hook in computed.uncovered),
            file=file,
        )
        return replace(
            loaded, status=SourceStatus.SKIPPED, sha256=version, hooks={}, diagnostics=(note,)
        )
    if digest in approved:
        unseen = "; ".join(computed.unseen)
        note = info(
            DiagnosticCode.PROJECT_APPROVED,
            f"project hooks digest {digest} is approved"
            + (f" (it cannot see: {unseen})" if unseen else ""),
            file=file,
        )
        return replace(loaded, sha256=version, diagnostics=(*loaded.diagnostics, note))
    note = error(
        DiagnosticCode.PROJECT_NOT_APPROVED,
        f"the project hooks' digest {digest} is not in sources.project_digests, so they are "
        "not loaded; after reviewing the hooks file and its scripts, add that digest to "
        "approve them (`cloudrunner hooks digest DIR` prints it)",
        file=file,
    )
    return replace(
        loaded, status=SourceStatus.SKIPPED, sha256=version, hooks={}, diagnostics=(note,)
    )
