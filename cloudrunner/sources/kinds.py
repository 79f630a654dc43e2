"""The registry of source kinds: their loaders in priority order, Cursor's four
(`SourceKind`'s order) and then Claude Code's settings files. A new kind of source is a
module filling `SourceLoader` and an entry here."""

from __future__ import annotations

from cloudrunner.sources import claude_code, enterprise, project, team, user
from cloudrunner.sources.loader import SourceLoader

LOADERS: tuple[SourceLoader, ...] = (enterprise, team, project, user, claude_code)
