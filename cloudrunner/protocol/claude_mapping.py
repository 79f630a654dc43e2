"""Claude Code hooks read as Cursor hooks: the one table of events and tool names.

Cursor's "Third Party Hooks" load hooks written for Claude Code from `.claude/settings.local.json`,
`.claude/settings.json` and `~/.claude/settings.json`, and map Claude's hook names onto
Cursor's. Everything cloudrunner knows about that mapping lives here, and the docs page is
generated from it: which Cursor event a Claude event runs on (or why it runs on none), what its
matcher is searched in, and how Cursor's tool names read in Claude's spelling.

Where Cursor's and Anthropic's documentation leave a choice open, the choice is a `DECISIONS`
entry (rendered on the same page).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from cloudrunner.protocol.event_names import (
    BEFORE_SUBMIT_PROMPT,
    CLAUDE_NOTIFICATION,
    CLAUDE_PERMISSION_REQUEST,
    CLAUDE_POST_TOOL_USE,
    CLAUDE_POST_TOOL_USE_FAILURE,
    CLAUDE_PRE_COMPACT,
    CLAUDE_PRE_TOOL_USE,
    CLAUDE_SESSION_END,
    CLAUDE_SESSION_START,
    CLAUDE_STOP,
    CLAUDE_SUBAGENT_START,
    CLAUDE_SUBAGENT_STOP,
    CLAUDE_USER_PROMPT_SUBMIT,
    POST_TOOL_USE,
    POST_TOOL_USE_FAILURE,
    PRE_COMPACT,
    PRE_TOOL_USE,
    SESSION_END,
    SESSION_START,
    STOP,
    SUBAGENT_START,
    SUBAGENT_STOP,
)
from cloudrunner.protocol.events import EventInput, EventSpec
from cloudrunner.protocol.matchers import MatchResult, match

if TYPE_CHECKING:
    from cloudrunner.protocol.config import HookEntry

#: the tool names Claude Code gives for Cursor's tool types (Cursor name -> Claude name);
#: `MCP:<tool>` and `Write` are handled by `claude_tool_name`
TOOL_NAMES: Mapping[str, str] = {
    "Shell": "Bash",
    "Read": "Read",
    "Grep": "Grep",
    "Task": "Agent",
    "Delete": "Delete",
    "Glob": "Glob",
    "WebFetch": "WebFetch",
    "WebSearch": "WebSearch",
}

#: how `Write` reads when the edit replaces text (Claude Code's Edit tool) or writes a file
EDIT_KEYS = ("old_string", "new_string", "edits")


class ClaudeOrigin(StrEnum):
    """The three Claude Code settings files, highest priority first (below Cursor's four)."""

    PROJECT_LOCAL = "claude-project-local"
    PROJECT = "claude-project"
    USER = "claude-user"

    @property
    def rank(self) -> int:
        """Priority after Cursor's four sources: 4, 5, 6."""
        return 4 + list(ClaudeOrigin).index(self)

    @property
    def relative(self) -> str:
        """The file, relative to the workspace (project files) or the home (the user file)."""
        return {
            ClaudeOrigin.PROJECT_LOCAL: ".claude/settings.local.json",
            ClaudeOrigin.PROJECT: ".claude/settings.json",
            ClaudeOrigin.USER: ".claude/settings.json",
        }[self]

    @property
    def label(self) -> str:
        return {
            ClaudeOrigin.PROJECT_LOCAL: "Claude project local",
            ClaudeOrigin.PROJECT: "Claude project",
            ClaudeOrigin.USER: "Claude user",
        }[self]


def claude_tool_name(tool_name: str | None, tool_input: Any = None) -> str | None:
    """Cursor's tool type in Claude Code's spelling (None when the payload has none)."""
    if tool_name is None:
        return None
    if tool_name.startswith("MCP:"):
        return "mcp__" + tool_name[4:]
    if tool_name == "Write":
        given = tool_input
        if isinstance(given, str):
            try:
                given = json.loads(given)
            except ValueError:
                given = None
        if isinstance(given, dict) and any(k in given for k in EDIT_KEYS):
            return "Edit"
        return "Write"
    return TOOL_NAMES.get(tool_name, tool_name)


Subject = Callable[[EventInput], str | None]


def _tool(payload: EventInput) -> str | None:
    name = getattr(payload, "tool_name", None)
    return (
        claude_tool_name(name, getattr(payload, "tool_input", None))
        if isinstance(name, str)
        else None
    )


def _field(name: str) -> Subject:
    def subject(payload: EventInput) -> str | None:
        value = getattr(payload, name, None)
        return value if isinstance(value, str) else None

    return subject


def _constant(value: str) -> Subject:
    def subject(payload: EventInput) -> str:
        return value

    return subject


@dataclass(frozen=True)
class ClaudeEvent:
    """One Claude Code hook event and the Cursor event it runs on."""

    name: str
    #: the Cursor event its hooks run on; None: they never run (see `unmapped_reason`)
    cursor: str | None
    #: what Claude's matcher is searched in (Claude's spelling); None: Claude ignores it
    subject: Subject | None
    subject_describes: str
    #: why a hook of an event without a Cursor equivalent never runs
    unmapped_reason: str = ""
    #: the Cursor subject also tried (Cursor's own tool names: its documentation's example
    #: matches `Shell` in a Claude file)
    cursor_subject: Subject | None = None


_NO_DIALOG = "cloud agents show no permission dialog, so there is nothing to answer"

CLAUDE_EVENTS: dict[str, ClaudeEvent] = {
    e.name: e
    for e in (
        ClaudeEvent(CLAUDE_PRE_TOOL_USE, PRE_TOOL_USE, _tool,
                    "the tool name (Claude's spelling)", cursor_subject=_field("tool_name")),
        ClaudeEvent(CLAUDE_POST_TOOL_USE, POST_TOOL_USE, _tool,
                    "the tool name (Claude's spelling)", cursor_subject=_field("tool_name")),
        ClaudeEvent(CLAUDE_POST_TOOL_USE_FAILURE, POST_TOOL_USE_FAILURE, _tool,
                    "the tool name (Claude's spelling)", cursor_subject=_field("tool_name")),
        ClaudeEvent(CLAUDE_USER_PROMPT_SUBMIT, BEFORE_SUBMIT_PROMPT, None, "nothing: no matcher"),
        ClaudeEvent(CLAUDE_STOP, STOP, None, "nothing: no matcher"),
        ClaudeEvent(CLAUDE_SUBAGENT_START, SUBAGENT_START, _field("subagent_type"),
                    "the agent type"),
        ClaudeEvent(CLAUDE_SUBAGENT_STOP, SUBAGENT_STOP, _field("subagent_type"),
                    "the agent type"),
        ClaudeEvent(CLAUDE_SESSION_START, SESSION_START, _constant("startup"),
                    "the session source (always `startup`)"),
        ClaudeEvent(CLAUDE_SESSION_END, SESSION_END, _field("reason"), "the end reason"),
        ClaudeEvent(CLAUDE_PRE_COMPACT, PRE_COMPACT, _field("trigger"),
                    "the trigger (`manual` or `auto`)"),
        ClaudeEvent(CLAUDE_NOTIFICATION, None, None, "-",
                    unmapped_reason="Cursor has no notification event"),
        ClaudeEvent(CLAUDE_PERMISSION_REQUEST, None, None, "-", unmapped_reason=_NO_DIALOG),
    )
}  # fmt: skip

#: Cursor event -> the Claude event whose hooks run on it
BY_CURSOR_EVENT: dict[str, ClaudeEvent] = {
    e.cursor: e for e in CLAUDE_EVENTS.values() if e.cursor is not None
}

#: per-hook keys Claude Code documents, with what cloudrunner does with each
HOOK_KEYS: Mapping[str, str] = {
    "type": "only `command` runs; `prompt`, `agent` and `http` hooks are skipped and reported",
    "command": "the command line, run by `/bin/sh -c` in the workspace root",
    "args": "exec form: `command` is the program and `args` its arguments, run without a "
    "shell (no expansion, no globbing)",
    "timeout": "seconds, as in Cursor's hooks",
    "statusMessage": "ignored (no spinner to show it in), reported",
    "async": "skipped and reported: a background hook cannot change the answer",
    "once": "ignored (it applies to skills' hooks), reported",
    "shell": "`bash` or `sh`: run as usual; any other shell is skipped and reported",
}

#: choices where Cursor's and Anthropic's public documentation are silent or disagree
DECISIONS: tuple[tuple[str, str], ...] = (
    ("Matchers see both spellings",
     "A Claude matcher is tried against the tool name in Claude's spelling (`Bash`) and, when "
     "that does not match, against Cursor's (`Shell`): Anthropic's documentation names "
     "Claude's tools, Cursor's example of a Claude file matches `Shell`."),
    ("Exact names and regular expressions",
     "A matcher made only of letters, digits, `_` and `|` is a list of exact names (as "
     "Claude Code reads it); anything else is an ECMAScript regular expression searched "
     "anywhere in the name, under the same time budget as Cursor matchers."),
    ("The subagent tool is `Agent`",
     "Claude Code 2.1.63 renamed its subagent tool from `Task` to `Agent` and still accepts "
     "`Task` in matchers. A Claude hook gets `tool_name: \"Agent\"` for Cursor's `Task`; a "
     "matcher `Task` still matches, through Cursor's spelling."),
    ("`Write` is `Edit` or `Write`",
     "Cursor has one `Write` tool type; Claude has `Edit` and `Write`. A `Write` whose input "
     "replaces text (`old_string`, `new_string` or `edits`) is `Edit`, any other is `Write`."),
    ("MCP tools",
     "Cursor's `MCP:<tool>` is `mcp__<tool>` (Claude's `mcp__<server>__<tool>` needs a server "
     "name Cursor's payload does not carry): a matcher `mcp__.*` matches every MCP tool."),
    ("Working directory",
     "Claude hooks of all three files run in the workspace root with `CLAUDE_PROJECT_DIR` set "
     "to it, as Claude Code runs them in the project directory."),
    ("Shell",
     "A command runs under `/bin/sh -c` like Cursor's hooks (Claude Code uses bash where it "
     "has one); a script that needs bash says so in its shebang."),
    ("Plain stdout",
     "Non-JSON stdout with exit code 0 is not an error. Claude Code adds it to the model's "
     "context on `SessionStart` and `UserPromptSubmit`, and shows it in its transcript "
     "elsewhere. On `SessionStart` it becomes `additional_context`. On `UserPromptSubmit` "
     "it is dropped, and the record says why as Claude Code would have used it: Cursor's "
     "`beforeSubmitPrompt` answer carries only `continue` and `user_message`, no context for "
     "the model (the same for `additionalContext` there). Elsewhere it is recorded as not "
     "mapped."),
    ("A decision that asks",
     "Where a Claude answer has no exact Cursor equivalent, the safer reading wins, and a "
     "decision that asks for confirmation is `ask`, never a pass. "
     "A top-level `\"decision\": \"ask\"` on `PreToolUse` is `permission: ask` (its "
     "`reason` the `user_message`), also over an `allow` in the same answer; on an event "
     "that can only allow or block (`UserPromptSubmit`, `SubagentStart`) it is a block; on "
     "one that takes no decision it is named as not mapped. Any other `decision` value is "
     "`invalid_output`."),
    ("The last assistant message",
     "Claude Code gives a `Stop` hook `last_assistant_message`; Cursor's `stop` does not "
     "carry it. The worker reads it from the end of the event's transcript, only when hooks "
     "may see that file themselves (the same checks as for its mount), once per event before "
     "any hook runs; without a readable transcript or an assistant message in it, the field "
     "is absent rather than made up."),
    ("What cannot be mapped",
     "A field of a Claude answer with no Cursor equivalent on that event (for example "
     "`additionalContext` on `PreToolUse`, `suppressOutput`) is named in the hook's outcome "
     "reason and its ignored fields; it is never dropped silently."),
    ("Tool output",
     "Cursor's `tool_output` becomes Claude's `tool_response`: decoded when it is JSON text; "
     "a shell's plain output becomes `{stdout, stderr: \"\", interrupted: false, isImage: "
     "false}` as Claude Code gives for `Bash`."),
    ("Loop budget",
     "A `Stop`/`SubagentStop` block becomes a `followup_message`, counted against the same "
     "loop budget (5) as Cursor's stop hooks; `stop_hook_active` is true when Cursor's "
     "`loop_count` is above 0."),
)  # fmt: skip


def claude_match(
    entry: HookEntry, spec: EventSpec, payload: EventInput, *, timeout_s: float
) -> MatchResult:
    """Claude's matcher semantics: searched in the Claude subject of the event (the tool name
    in Claude's spelling), then in Cursor's (see the mapping's decisions)."""
    assert entry.claude is not None
    event = CLAUDE_EVENTS[entry.claude.event]
    if event.subject is None:
        described = dataclasses.replace(spec, matcher_subject=None)
        return match(entry.matcher, described, payload, timeout_s=timeout_s)
    first = match(
        entry.matcher, dataclasses.replace(spec, matcher_subject=event.subject), payload,
        timeout_s=timeout_s,
    )  # fmt: skip
    if first.matched or first.timed_out or event.cursor_subject is None:
        return first
    second = match(
        entry.matcher, dataclasses.replace(spec, matcher_subject=event.cursor_subject), payload,
        timeout_s=timeout_s,
    )  # fmt: skip
    if second.matched or second.timed_out:
        return second
    return first
