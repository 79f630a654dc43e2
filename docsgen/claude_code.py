"""docs/concepts/claude-code.md: Claude Code hooks as sources, with the mapping table the
worker runs on (`cloudrunner.protocol.claude_mapping`)."""

from __future__ import annotations

from cloudrunner.protocol.claude_mapping import (
    CLAUDE_EVENTS,
    DECISIONS,
    EDIT_KEYS,
    HOOK_KEYS,
    TOOL_NAMES,
    ClaudeOrigin,
)
from cloudrunner.protocol.events import EVENTS
from docsgen.markdown import GENERATED_NOTE, code, table

_INTRO = """\
Cursor can run hooks written for Claude Code (its "Third Party Hooks" setting, off by
default). cloudrunner does the same when `sources.claude_code` is on (`--claude-code`,
`CLOUDRUNNER_CLAUDE_CODE=true`, or `claude_code = true` under `[sources]`): many repositories
carry `.claude/settings.json` hooks and no `.cursor/hooks.json`, and a team that turns the
setting on expects its guards to run in cloud agents too.

## What loads, and in which order

With the setting on, three more sources load below Cursor's four. Priority, highest first:
"""

_LOADING = """\
- The two project files are **project sources** for everything that decides whether
  repository hooks run: an untrusted workspace loads neither, managed-only mode
  (`sources.allowed` without `project`) loads neither, and pinned digests
  (`sources.project_digests`) cover each file and the scripts its commands name (each file
  has its own digest: `cloudrunner hooks digest --file .claude/settings.json DIR` prints it,
  and a Claude file that is not approved says which digest to add).
- `~/.claude/settings.json` is a **user source**: skipped and reported in the cloud profile,
  like `~/.cursor/hooks.json`; loaded in the desktop profile.
- Their hooks run in the project source's sandbox, in the workspace root, with
  `CLAUDE_PROJECT_DIR` (and `CURSOR_PROJECT_DIR`) set to it.
- With the setting off, a repository's Claude files are not read for hooks; each one that
  exists is reported once (`claude-code-off`), and `cloudrunner validate` lists its hooks as
  skipped for that reason.
- All matching hooks of all sources run; conflicting answers are merged by the usual rules,
  higher priority first. Audit records name each Claude hook's file, and its outcome reason
  starts with `Claude Code <Event> hook`.

## The format, read as Claude Code reads it

A Claude settings file holds `hooks.<Event>[] = {matcher, hooks: [{type, command, timeout}]}`.
The other keys of the file (`permissions`, `env`, `model`, ...) are Claude Code's and are not
read; `disableAllHooks: true` loads none of the file's hooks. Invalid JSON and wrong types
disable the file (with file, JSON pointer, line and column, as for `hooks.json`); unknown
events and unknown keys are warnings. The keys of one hook:
"""

_ANSWERS = """\
## Input and answer

Each Claude hook gets on stdin the document Claude Code gives: `session_id` (the
conversation id), `transcript_path`, `cwd`, `hook_event_name` in Claude's spelling, and the
event's own fields (`tool_name` in Claude's spelling, `tool_input`, `tool_response`,
`prompt`, `stop_hook_active`, `agent_type`, `trigger`, ...), built from Cursor's event.
A `Stop` hook also gets `last_assistant_message`, read from the transcript (see the
decisions below).

Its answer is read as Claude Code reads it and written as the Cursor answer it means:

| Claude answer | on | Cursor answer |
|---|---|---|
| exit code 2, stderr | `PreToolUse` | `permission: deny`, stderr as `agent_message` |
| exit code 2, stderr | `UserPromptSubmit` | `continue: false`, stderr as `user_message` |
| exit code 2, stderr | `Stop`, `SubagentStop` | stderr as `followup_message` (the agent goes on) |
| exit code 2, stderr | `PostToolUse` | stderr as `additional_context` |
| `hookSpecificOutput.permissionDecision` | `PreToolUse` | `permission` (allow, deny, ask) |
| `permissionDecisionReason` | `PreToolUse` | `agent_message` on deny, else `user_message` |
| `hookSpecificOutput.updatedInput` | `PreToolUse` | `updated_input` |
| `hookSpecificOutput.additionalContext` | `PostToolUse`, `SessionStart` | `additional_context` |
| `hookSpecificOutput.updatedMCPToolOutput` | `PostToolUse` | `updated_mcp_tool_output` |
| `decision: block`, `reason` | `PreToolUse` / `UserPromptSubmit` | deny / `continue: false` |
| `decision: ask`, `reason` | `PreToolUse` | `permission: ask`, `reason` as `user_message` |
| `decision: ask`, `reason` | `UserPromptSubmit` | `continue: false` (it cannot ask) |
| plain stdout | `UserPromptSubmit` | dropped, recorded why (model context, see below) |
| `decision: block`, `reason` | `Stop`, `SubagentStop` | `reason` as `followup_message` |
| `decision: block`, `reason` | `PostToolUse` | `reason` as `additional_context` |
| `continue: false`, `stopReason` | decision events | deny / `continue: false` with the reason |
| `systemMessage` | events with `user_message` | `user_message` |
| any other exit code | any | an `error` outcome, as for Cursor hooks |

The translated answer is merged by the usual rules. What has no Cursor equivalent on the
event (for example `additionalContext` on `PreToolUse`, `suppressOutput`, an unknown field)
is named in the hook's outcome reason and its ignored fields: recorded, never dropped
silently. A malformed answer (`permissionDecision: "maybe"`) is `invalid_output`.
"""


def _origin_rows() -> list[tuple[str, str, str]]:
    cursor = [
        ("1", "enterprise", "`/etc/cloudrunner/enterprise-hooks.json` by default"),
        ("2", "team", "the managed hooks file or directory"),
        ("3", "project", "`.cursor/hooks.json`"),
        ("4", "user", "`~/.cursor/hooks.json`"),
    ]
    claude = [
        (str(o.rank + 1), o.label, code(("~/" if o is ClaudeOrigin.USER else "") + o.relative))
        for o in ClaudeOrigin
    ]
    return cursor + claude


def _events() -> str:
    rows = []
    for e in CLAUDE_EVENTS.values():
        if e.cursor is None:
            rows.append((code(e.name), "none", "-", e.unmapped_reason))
            continue
        spec = EVENTS[e.cursor]
        note = "" if spec.in_cloud else f"not in cloud agents: {spec.not_in_cloud_reason}"
        rows.append((code(e.name), code(e.cursor), e.subject_describes, note))
    return table(("Claude event", "Cursor event", "matcher is searched in", "note"), rows)


def _tools() -> str:
    rows = [(code(c), code(k)) for c, k in TOOL_NAMES.items()]
    keys = ", ".join(code(k) for k in EDIT_KEYS)
    rows.insert(1, (code("Write"), f"{code('Edit')} when the input has {keys}, else "
                                   f"{code('Write')}"))  # fmt: skip
    rows.append((code("MCP:<tool>"), code("mcp__<tool>")))
    rows.append(("any other", "unchanged"))
    return table(("Cursor tool type", "Claude tool name"), rows)


def render() -> str:
    out = [
        "# Claude Code hooks",
        "",
        GENERATED_NOTE,
        _INTRO,
        table(("priority", "source", "file"), _origin_rows()),
        _LOADING,
        table(("key", "what cloudrunner does"), [(code(k), v) for k, v in HOOK_KEYS.items()]),
        "## Events",
        "",
        "Each Claude Code event runs on the Cursor event an agent sends for it:",
        "",
        _events(),
        "## Tool names",
        "",
        "Claude's matchers and payloads name tools in Claude's spelling:",
        "",
        _tools(),
        'Matchers follow Claude Code: none, `""` or `*` match everything; a matcher made only',
        "of letters, digits, `_` and `|` is a list of exact names (`Edit|Write`); anything else",
        "is a regular expression (`Notebook.*`, `mcp__.*`), run by the same bounded ECMAScript",
        "engine as Cursor matchers.",
        "",
        _ANSWERS,
        "## Decisions",
        "",
        "Where Cursor's and Anthropic's public documentation leave the mapping open, cloudrunner",
        "chose as follows.",
        "",
        *(line for title, text in DECISIONS for line in (f"- **{title}.** {text}",)),
        "",
    ]
    return "\n".join(out)
