"""A hook as the plan of an event gives it (`PlannedHook`): its entry, its source and where
it runs, its timeout and budget, and how its matcher matched. Its own module so that the
results and the Claude translation, which the plan uses, can name it without importing the
plan."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudrunner.protocol.config import HookDefinition, HookEntry
from cloudrunner.protocol.matchers import MatchResult
from cloudrunner.protocol.profiles import SourceKind


@dataclass(frozen=True)
class PlannedHook:
    source_kind: SourceKind
    source_path: Path
    #: sha256 of the source file's bytes, so an audit record names the exact config
    source_sha256: str
    working_dir: Path
    entry: HookEntry
    #: the command line ("" for prompt hooks)
    command: str
    #: seconds, the worker default applied
    timeout: float
    fail_closed: bool
    #: follow-up budget (None = unlimited); meaningful on stop and subagentStop
    loop_limit: int | None
    match: MatchResult
    #: the source's place in the priority order (None: its kind's); Claude files rank below
    rank: int | None = None

    @property
    def source_priority(self) -> int:
        return self.source_kind.priority if self.rank is None else self.rank

    @property
    def event(self) -> str:
        return self.entry.event

    @property
    def index(self) -> int:
        return self.entry.index

    @property
    def definition(self) -> HookDefinition:
        return self.entry.definition

    @functools.cached_property
    def hook_id(self) -> str:
        """Stable and unique within a run: source kind, file and JSON pointer (made once:
        the runner, the merge and the audit records each ask for it)."""
        return f"{self.source_kind}:{self.source_path}#{self.entry.pointer}"

    @functools.cached_property
    def script_key(self) -> str:
        """What loop budgets are counted per (with the conversation id)."""
        return f"{self.event}\x1f{self.source_kind}\x1f{self.source_path}\x1f{self.command}"

    @property
    def order(self) -> tuple[int, int]:
        return (self.source_priority, self.index)

    def describe(self) -> str:
        shown = self.command if len(self.command) <= 80 else self.command[:77] + "..."
        claude = self.entry.claude
        where = f"Claude Code {claude.event} hook" if claude else self.source_kind.value
        return f"{where} {self.event}[{self.index}] `{shown}` ({self.source_path})"

    def to_dict(self) -> dict[str, Any]:
        out = self._fields()
        if self.entry.claude is not None:
            out["claude_event"] = self.entry.claude.event
        return out

    def _fields(self) -> dict[str, Any]:
        return {
            "id": self.hook_id,
            "source": self.source_kind.value,
            "source_path": str(self.source_path),
            "source_sha256": self.source_sha256,
            "event": self.event,
            "index": self.index,
            "pointer": self.entry.pointer,
            "command": self.command,
            "type": self.definition.type,
            "working_dir": str(self.working_dir),
            "timeout": self.timeout,
            "fail_closed": self.fail_closed,
            "loop_limit": self.loop_limit,
            "matcher": self.definition.matcher,
            "match": self.match.reason,
        }
