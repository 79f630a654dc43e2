"""The one interface every source kind's loader fills, and what loaders share.

A loader is a module of this package with a `load` (as pre-commit's languages are modules
that fill its `Language` protocol); `kinds.LOADERS` lists them in priority order. Adding
a source kind (as Claude Code's settings files were) is a new module and a registry entry.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Protocol

from cloudrunner.protocol.claude_mapping import ClaudeOrigin
from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import error, info
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sources.files import seen
from cloudrunner.sources.loaded import LoadedSource, SourceSettings, SourceStatus, not_loaded
from cloudrunner.workspace import inside, real_path


class SourceLoader(Protocol):
    """A kind of hook source."""

    def load(self, settings: SourceSettings) -> tuple[LoadedSource, ...]:
        """This kind's sources under `settings`, highest priority first: each one loaded, or
        not loaded with a diagnostic saying why (none when there is nothing to say). Never
        raises for bad files."""
        ...


def not_allowed(
    kind: SourceKind, settings: SourceSettings, *, origin: ClaudeOrigin | None = None
) -> LoadedSource:
    """The source of `kind` (of a Claude Code file when `origin` is given) as not loaded
    because the operator does not allow its kind (`sources.allowed`)."""
    allowed = ", ".join(k.value for k in SourceKind if k in settings.allowed) or "none"
    what = f"Claude Code {kind}" if origin is not None else kind.value
    loaded = not_loaded(
        kind,
        None,
        SourceStatus.SKIPPED,
        info(
            DiagnosticCode.SOURCE_NOT_ALLOWED,
            f"{what} hooks are not loaded: the operator allows only these sources "
            f"(sources.allowed): {allowed}",
        ),
    )
    return replace(loaded, origin=origin)


def managed_refusal(kind: SourceKind, path: Path, settings: SourceSettings) -> LoadedSource | None:
    """An operator's (enterprise or team) hooks path that must not load: a relative one
    (it would depend on where the process started) or one inside the workspace (the
    repository would choose the operator's hooks), checked on every load because the
    workspace may come with the event."""
    problem = ""
    if not path.is_absolute():
        problem = "is a relative path; give an absolute one"
    elif settings.workspace is not None and inside(
        seen(real_path, path), seen(real_path, settings.workspace)
    ):
        problem = (
            f"lies inside the workspace {settings.workspace}, so the repository would decide "
            f"the {kind} hooks; keep them outside every checkout"
        )
    if not problem:
        return None
    note = error(DiagnosticCode.MANAGED_PATH_REFUSED,
                 f"the {kind} hooks path {path} {problem}; the {kind} source is not loaded",
                 file=str(path))  # fmt: skip
    return LoadedSource(kind, path, None, SourceStatus.BROKEN, None, None, {}, (note,))
