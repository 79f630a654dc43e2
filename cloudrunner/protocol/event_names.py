"""The hook events' names, each spelled once: Cursor's 21 events, the other spellings people
write for them, Claude Code's events, and how a block reads on each event that can block.

Nothing but literals, and no import at all: the per-event client (`cloudrunner.client`,
which starts on every agent step) imports it to answer when no daemon does, so it must cost
next to nothing (no enum, no typing, no pydantic); a daemon's answer does not import it.
The protocol core (`protocol/events.py`) builds its table from these names and checks the
blocking table against its specs when it is imported; the Go client's copy
(`client/internal/events/events.go`) is checked against this module by
tests/unit/client/test_transport.py.
"""

# No `from __future__ import annotations`: the client's start-up would pay for it.

# --- Cursor's events (spec section 3), in the order the protocol core registers them -------

PRE_TOOL_USE = "preToolUse"
POST_TOOL_USE = "postToolUse"
POST_TOOL_USE_FAILURE = "postToolUseFailure"
SUBAGENT_START = "subagentStart"
SUBAGENT_STOP = "subagentStop"
BEFORE_SHELL_EXECUTION = "beforeShellExecution"
AFTER_SHELL_EXECUTION = "afterShellExecution"
BEFORE_READ_FILE = "beforeReadFile"
AFTER_FILE_EDIT = "afterFileEdit"
BEFORE_SUBMIT_PROMPT = "beforeSubmitPrompt"
PRE_COMPACT = "preCompact"
STOP = "stop"
AFTER_AGENT_RESPONSE = "afterAgentResponse"
AFTER_AGENT_THOUGHT = "afterAgentThought"
SESSION_START = "sessionStart"
SESSION_END = "sessionEnd"
BEFORE_MCP_EXECUTION = "beforeMCPExecution"
AFTER_MCP_EXECUTION = "afterMCPExecution"
BEFORE_TAB_FILE_READ = "beforeTabFileRead"
AFTER_TAB_FILE_EDIT = "afterTabFileEdit"
WORKSPACE_OPEN = "workspaceOpen"

#: every Cursor event, in the order `protocol/events.py` registers them (and `audit query
#: --event` lists them)
EVENT_NAMES: tuple[str, ...] = (
    PRE_TOOL_USE,
    POST_TOOL_USE,
    POST_TOOL_USE_FAILURE,
    SUBAGENT_START,
    SUBAGENT_STOP,
    BEFORE_SHELL_EXECUTION,
    AFTER_SHELL_EXECUTION,
    BEFORE_READ_FILE,
    AFTER_FILE_EDIT,
    BEFORE_SUBMIT_PROMPT,
    PRE_COMPACT,
    STOP,
    AFTER_AGENT_RESPONSE,
    AFTER_AGENT_THOUGHT,
    SESSION_START,
    SESSION_END,
    BEFORE_MCP_EXECUTION,
    AFTER_MCP_EXECUTION,
    BEFORE_TAB_FILE_READ,
    AFTER_TAB_FILE_EDIT,
    WORKSPACE_OPEN,
)

#: the events that can block, with how a block reads: the decision field (`permission`, or
#: `continue` for beforeSubmitPrompt) and the field its message goes in (None: the event
#: carries no message). The client answers by this table when no daemon answers.
BLOCKING_EVENTS: dict[str, tuple[str, str | None]] = {
    BEFORE_MCP_EXECUTION: ("permission", "agent_message"),
    BEFORE_READ_FILE: ("permission", "user_message"),
    BEFORE_SHELL_EXECUTION: ("permission", "agent_message"),
    BEFORE_SUBMIT_PROMPT: ("continue", "user_message"),
    BEFORE_TAB_FILE_READ: ("permission", None),
    PRE_TOOL_USE: ("permission", "agent_message"),
    SUBAGENT_START: ("permission", "user_message"),
}

# --- Claude Code's hook events (the ones Cursor's third-party hooks read) -------------------

CLAUDE_PRE_TOOL_USE = "PreToolUse"
CLAUDE_POST_TOOL_USE = "PostToolUse"
CLAUDE_POST_TOOL_USE_FAILURE = "PostToolUseFailure"
CLAUDE_USER_PROMPT_SUBMIT = "UserPromptSubmit"
CLAUDE_STOP = "Stop"
CLAUDE_SUBAGENT_START = "SubagentStart"
CLAUDE_SUBAGENT_STOP = "SubagentStop"
CLAUDE_SESSION_START = "SessionStart"
CLAUDE_SESSION_END = "SessionEnd"
CLAUDE_PRE_COMPACT = "PreCompact"
CLAUDE_NOTIFICATION = "Notification"
CLAUDE_PERMISSION_REQUEST = "PermissionRequest"

#: every Claude Code event, in the order `protocol/claude_mapping.py` maps them
CLAUDE_EVENT_NAMES: tuple[str, ...] = (
    CLAUDE_PRE_TOOL_USE,
    CLAUDE_POST_TOOL_USE,
    CLAUDE_POST_TOOL_USE_FAILURE,
    CLAUDE_USER_PROMPT_SUBMIT,
    CLAUDE_STOP,
    CLAUDE_SUBAGENT_START,
    CLAUDE_SUBAGENT_STOP,
    CLAUDE_SESSION_START,
    CLAUDE_SESSION_END,
    CLAUDE_PRE_COMPACT,
    CLAUDE_NOTIFICATION,
    CLAUDE_PERMISSION_REQUEST,
)

# --- other spellings -----------------------------------------------------------------------

#: names people write for our events (Claude Code's PascalCase hooks, common misspellings),
#: so a warning can say what was probably meant; not accepted as events
EVENT_ALIASES: dict[str, str] = {
    CLAUDE_PRE_TOOL_USE: PRE_TOOL_USE,
    CLAUDE_POST_TOOL_USE: POST_TOOL_USE,
    CLAUDE_POST_TOOL_USE_FAILURE: POST_TOOL_USE_FAILURE,
    CLAUDE_SESSION_START: SESSION_START,
    CLAUDE_SESSION_END: SESSION_END,
    CLAUDE_USER_PROMPT_SUBMIT: BEFORE_SUBMIT_PROMPT,
    "userPromptSubmit": BEFORE_SUBMIT_PROMPT,
    CLAUDE_STOP: STOP,
    CLAUDE_SUBAGENT_STOP: SUBAGENT_STOP,
    CLAUDE_SUBAGENT_START: SUBAGENT_START,
    CLAUDE_PRE_COMPACT: PRE_COMPACT,
    "beforeShellCommand": BEFORE_SHELL_EXECUTION,
    "beforeToolCall": PRE_TOOL_USE,
}
