"""The 21 hook events: input and output models and everything else known per event.

One table (`EVENTS`) holds, for each event, its models, whether cloud agents run it (and the
documented reason when not), what decision it can take (and so whether it can block), the
permission values it accepts, the field its matcher is searched in, and whether it carries a
follow-up message. Everything else in the core asks this table, so a reader finds spec section
3 and the matcher table of section 4 in one place. The events' names are spelled in
`event_names` (standard library only, so the per-event client can import them too).

Inputs are tolerant: unknown fields are kept and passed to hooks unchanged, and every known
field is optional (real payloads omit some). Outputs are strict about the fields they know:
the type and allowed values are checked, `null` counts as "not given", and unknown fields are
ignored (and reported by the classifier), because hooks answer with editor-specific extras.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from cloudrunner.protocol import event_names
from cloudrunner.protocol.event_names import (
    AFTER_AGENT_RESPONSE,
    AFTER_AGENT_THOUGHT,
    AFTER_FILE_EDIT,
    AFTER_MCP_EXECUTION,
    AFTER_SHELL_EXECUTION,
    AFTER_TAB_FILE_EDIT,
    BEFORE_MCP_EXECUTION,
    BEFORE_READ_FILE,
    BEFORE_SHELL_EXECUTION,
    BEFORE_SUBMIT_PROMPT,
    BEFORE_TAB_FILE_READ,
    POST_TOOL_USE,
    POST_TOOL_USE_FAILURE,
    PRE_COMPACT,
    PRE_TOOL_USE,
    SESSION_END,
    SESSION_START,
    STOP,
    SUBAGENT_START,
    SUBAGENT_STOP,
    WORKSPACE_OPEN,
)
from cloudrunner.protocol.protocol_errors import UnknownEvent


class _Input(BaseModel):
    model_config = ConfigDict(extra="allow", protected_namespaces=())


class ModelParam(_Input):
    id: str | None = None
    value: Any = None


class Attachment(_Input):
    type: Literal["file", "rule"] | None = None
    file_path: str | None = None


class FileEdit(_Input):
    old_string: str | None = None
    new_string: str | None = None


class TabFileEdit(FileEdit):
    range: dict[str, Any] | None = None
    old_line: str | None = None
    new_line: str | None = None


class EventInput(_Input):
    """The base fields every hook receives (spec section 3)."""

    conversation_id: str | None = None
    generation_id: str | None = None
    model: str | None = None
    model_id: str | None = None
    model_params: list[ModelParam] | None = None
    hook_event_name: str | None = None
    cursor_version: str | None = None
    workspace_roots: list[str] | None = None
    user_email: str | None = None
    transcript_path: str | None = None


Number = float


class PreToolUseInput(EventInput):
    tool_name: str | None = None
    tool_input: Any = None
    tool_use_id: str | None = None
    cwd: str | None = None
    agent_message: str | None = None


class PostToolUseInput(EventInput):
    tool_name: str | None = None
    tool_input: Any = None
    tool_output: str | None = None
    tool_use_id: str | None = None
    cwd: str | None = None
    duration: Number | None = None


class PostToolUseFailureInput(EventInput):
    tool_name: str | None = None
    tool_input: Any = None
    tool_use_id: str | None = None
    cwd: str | None = None
    error_message: str | None = None
    failure_type: Literal["timeout", "error", "permission_denied"] | None = None
    duration: Number | None = None
    is_interrupt: bool | None = None


class SubagentStartInput(EventInput):
    subagent_id: str | None = None
    subagent_type: str | None = None
    task: str | None = None
    parent_conversation_id: str | None = None
    tool_call_id: str | None = None
    subagent_model: str | None = None
    is_parallel_worker: bool | None = None
    git_branch: str | None = None


class SubagentStopInput(EventInput):
    subagent_type: str | None = None
    status: Literal["completed", "error", "aborted"] | None = None
    task: str | None = None
    description: str | None = None
    summary: str | None = None
    duration_ms: Number | None = None
    message_count: int | None = None
    tool_call_count: int | None = None
    loop_count: int | None = None
    modified_files: list[str] | None = None
    agent_transcript_path: str | None = None


class BeforeShellExecutionInput(EventInput):
    command: str | None = None
    cwd: str | None = None
    sandbox: bool | None = None


class AfterShellExecutionInput(EventInput):
    command: str | None = None
    output: str | None = None
    duration: Number | None = None
    sandbox: bool | None = None


class BeforeMCPExecutionInput(EventInput):
    tool_name: str | None = None
    #: a JSON string of the tool's parameters (kept as given)
    tool_input: Any = None
    url: str | None = None
    command: str | None = None


class AfterMCPExecutionInput(EventInput):
    tool_name: str | None = None
    tool_input: Any = None
    result_json: Any = None
    duration: Number | None = None


class BeforeReadFileInput(EventInput):
    file_path: str | None = None
    content: str | None = None
    attachments: list[Attachment] | None = None


class AfterFileEditInput(EventInput):
    file_path: str | None = None
    edits: list[FileEdit] | None = None


class BeforeSubmitPromptInput(EventInput):
    prompt: str | None = None
    attachments: list[Attachment] | None = None


class PreCompactInput(EventInput):
    trigger: Literal["auto", "manual"] | None = None
    context_usage_percent: Number | None = None
    context_tokens: int | None = None
    context_window_size: int | None = None
    message_count: int | None = None
    messages_to_compact: int | None = None
    is_first_compaction: bool | None = None


class StopInput(EventInput):
    status: Literal["completed", "aborted", "error"] | None = None
    loop_count: int | None = None


class AfterAgentResponseInput(EventInput):
    text: str | None = None


class AfterAgentThoughtInput(EventInput):
    text: str | None = None
    duration_ms: Number | None = None


class SessionStartInput(EventInput):
    session_id: str | None = None
    is_background_agent: bool | None = None
    composer_mode: Literal["agent", "ask", "edit"] | None = None


class SessionEndInput(EventInput):
    session_id: str | None = None
    reason: str | None = None
    duration_ms: Number | None = None
    is_background_agent: bool | None = None
    final_status: str | None = None
    error_message: str | None = None


class BeforeTabFileReadInput(EventInput):
    file_path: str | None = None
    content: str | None = None


class AfterTabFileEditInput(EventInput):
    file_path: str | None = None
    edits: list[TabFileEdit] | None = None


class WorkspaceOpenInput(EventInput):
    """workspaceOpen carries only hook_event_name, cursor_version, workspace_roots, user_email."""


# --- outputs -------------------------------------------------------------------------------


class EventOutput(BaseModel):
    """An output with no fields: any JSON object is accepted and its fields are ignored."""

    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)


Permission3 = Literal["allow", "deny", "ask"]
Permission2 = Literal["allow", "deny"]


class PermissionOutput(EventOutput):
    permission: Permission3 | None = None
    user_message: str | None = None
    agent_message: str | None = None


class PreToolUseOutput(PermissionOutput):
    updated_input: dict[str, JsonValue] | None = None


class PostToolUseOutput(EventOutput):
    updated_mcp_tool_output: JsonValue = None
    additional_context: str | None = None


class SubagentStartOutput(EventOutput):
    #: `ask` is accepted and counts as deny
    permission: Permission3 | None = None
    user_message: str | None = None


class FollowupOutput(EventOutput):
    followup_message: str | None = None


class BeforeReadFileOutput(EventOutput):
    permission: Permission2 | None = None
    user_message: str | None = None


class BeforeSubmitPromptOutput(EventOutput):
    continue_: bool | None = Field(default=None, alias="continue")
    user_message: str | None = None


class PreCompactOutput(EventOutput):
    user_message: str | None = None


class SessionStartOutput(EventOutput):
    env: dict[str, str] | None = None
    additional_context: str | None = None


class BeforeTabFileReadOutput(EventOutput):
    permission: Permission2 | None = None


class WorkspaceOpenOutput(EventOutput):
    plugin_paths: list[str] | None = Field(default=None, alias="pluginPaths")


# --- the table -----------------------------------------------------------------------------


class Decision(StrEnum):
    """What kind of decision an event's answer carries; any decision can block."""

    NONE = "none"
    PERMISSION = "permission"
    #: beforeSubmitPrompt: `continue: false` blocks
    CONTINUE = "continue"


MatcherSubject = Callable[[EventInput], str | None]


def _field(name: str) -> MatcherSubject:
    def subject(payload: EventInput) -> str | None:
        value = getattr(payload, name, None)
        return value if isinstance(value, str) else None

    return subject


def _constant(value: str) -> MatcherSubject:
    def subject(payload: EventInput) -> str:
        return value

    return subject


@dataclass(frozen=True)
class EventSpec:
    name: str
    input_model: type[EventInput]
    output_model: type[EventOutput]
    in_cloud: bool
    #: the documented reason an event does not run in cloud agents (None when it does)
    not_in_cloud_reason: str | None
    decision: Decision
    #: permission values a hook may answer (empty for events without permission)
    permissions: frozenset[str]
    #: the event accepts `ask` but treats it as `deny` (subagentStart)
    ask_means_deny: bool
    #: what a matcher is searched in; None means a matcher is a warning and does not filter
    matcher_subject: MatcherSubject | None
    matcher_describes: str | None
    #: the output has `followup_message`, subject to `loop_limit`
    follows_up: bool

    @property
    def can_block(self) -> bool:
        return self.decision is not Decision.NONE

    @property
    def output_fields(self) -> tuple[str, ...]:
        """The wire names of the output fields this event knows."""
        return tuple((info.alias or name) for name, info in self.output_model.model_fields.items())

    def message_field(self) -> str | None:
        """Where a block's explanation goes: `agent_message` if the event has it, else
        `user_message` (so a block by exit 2 or by a failClosed failure is never mute)."""
        fields = self.output_fields
        if "agent_message" in fields:
            return "agent_message"
        if "user_message" in fields:
            return "user_message"
        return None


_PERM3 = frozenset({"allow", "deny", "ask"})
_PERM2 = frozenset({"allow", "deny"})
_NONE: frozenset[str] = frozenset()

_READ_ONLY_START = (
    "a cloud agent may start in a read-only environment, so the hook would fire late, "
    "and there is no editor session boundary"
)
_MCP_DEFERRED = (
    "deferred in cloud agents: they may start read-only, so MCP hooks could not be "
    "enforced from the first call"
)
_TAB = "Tab is an editor feature; cloud agents have no Tab completions"
_WORKSPACE = "editor lifecycle event; cloud agents do not open editor workspaces"


def _spec(
    name: str,
    input_model: type[EventInput],
    output_model: type[EventOutput] = EventOutput,
    *,
    cloud: str | None = None,
    decision: Decision = Decision.NONE,
    permissions: frozenset[str] = _NONE,
    ask_means_deny: bool = False,
    subject: MatcherSubject | None = None,
    describes: str | None = None,
    follows_up: bool = False,
) -> EventSpec:
    return EventSpec(
        name=name,
        input_model=input_model,
        output_model=output_model,
        in_cloud=cloud is None,
        not_in_cloud_reason=cloud,
        decision=decision,
        permissions=permissions,
        ask_means_deny=ask_means_deny,
        matcher_subject=subject,
        matcher_describes=describes,
        follows_up=follows_up,
    )


_TOOL = "the tool type (Shell, Read, Write, Grep, Delete, Task, or MCP:<tool_name>)"
_PERMISSION = Decision.PERMISSION

EVENTS: dict[str, EventSpec] = {
    s.name: s
    for s in (
        _spec(PRE_TOOL_USE, PreToolUseInput, PreToolUseOutput, decision=_PERMISSION,
              permissions=_PERM3, subject=_field("tool_name"), describes=_TOOL),
        _spec(POST_TOOL_USE, PostToolUseInput, PostToolUseOutput,
              subject=_field("tool_name"), describes=_TOOL),
        _spec(POST_TOOL_USE_FAILURE, PostToolUseFailureInput,
              subject=_field("tool_name"), describes=_TOOL),
        _spec(SUBAGENT_START, SubagentStartInput, SubagentStartOutput, decision=_PERMISSION,
              permissions=_PERM3, ask_means_deny=True, subject=_field("subagent_type"),
              describes="subagent_type"),
        _spec(SUBAGENT_STOP, SubagentStopInput, FollowupOutput,
              subject=_field("subagent_type"), describes="subagent_type", follows_up=True),
        _spec(BEFORE_SHELL_EXECUTION, BeforeShellExecutionInput, PermissionOutput,
              decision=_PERMISSION, permissions=_PERM3, subject=_field("command"),
              describes="the whole command string"),
        _spec(AFTER_SHELL_EXECUTION, AfterShellExecutionInput,
              subject=_field("command"), describes="the whole command string"),
        _spec(BEFORE_READ_FILE, BeforeReadFileInput, BeforeReadFileOutput,
              decision=_PERMISSION, permissions=_PERM2, subject=_constant("Read"),
              describes="the constant `Read`"),
        _spec(AFTER_FILE_EDIT, AfterFileEditInput,
              subject=_constant("Write"), describes="the constant `Write`"),
        _spec(BEFORE_SUBMIT_PROMPT, BeforeSubmitPromptInput, BeforeSubmitPromptOutput,
              decision=Decision.CONTINUE, subject=_constant("UserPromptSubmit"),
              describes="the constant `UserPromptSubmit`"),
        _spec(PRE_COMPACT, PreCompactInput, PreCompactOutput),
        _spec(STOP, StopInput, FollowupOutput, subject=_constant("Stop"),
              describes="the constant `Stop`", follows_up=True),
        _spec(AFTER_AGENT_RESPONSE, AfterAgentResponseInput,
              subject=_constant("AgentResponse"), describes="the constant `AgentResponse`"),
        _spec(AFTER_AGENT_THOUGHT, AfterAgentThoughtInput,
              subject=_constant("AgentThought"), describes="the constant `AgentThought`"),
        _spec(SESSION_START, SessionStartInput, SessionStartOutput, cloud=_READ_ONLY_START),
        _spec(SESSION_END, SessionEndInput, cloud=_READ_ONLY_START),
        _spec(BEFORE_MCP_EXECUTION, BeforeMCPExecutionInput, PermissionOutput,
              cloud=_MCP_DEFERRED, decision=_PERMISSION, permissions=_PERM3),
        _spec(AFTER_MCP_EXECUTION, AfterMCPExecutionInput, cloud=_MCP_DEFERRED),
        _spec(BEFORE_TAB_FILE_READ, BeforeTabFileReadInput, BeforeTabFileReadOutput,
              cloud=_TAB, decision=_PERMISSION, permissions=_PERM2,
              subject=_constant("TabRead"), describes="the constant `TabRead`"),
        _spec(AFTER_TAB_FILE_EDIT, AfterTabFileEditInput, cloud=_TAB,
              subject=_constant("TabWrite"), describes="the constant `TabWrite`"),
        _spec(WORKSPACE_OPEN, WorkspaceOpenInput, WorkspaceOpenOutput, cloud=_WORKSPACE),
    )
}  # fmt: skip

CLOUD_EVENTS: tuple[str, ...] = tuple(n for n, s in EVENTS.items() if s.in_cloud)

#: the decision events that can block, and so short-circuit lower-priority sources
BLOCKING_EVENTS: tuple[str, ...] = tuple(n for n, s in EVENTS.items() if s.can_block)

# the names are spelled once, in event_names (which the client imports without pydantic):
# the table above must hold exactly those, in their order, and block as their table says
if tuple(EVENTS) != event_names.EVENT_NAMES:  # pragma: no cover - a change to one only
    raise AssertionError("protocol/events.py and event_names.EVENT_NAMES list different events")
if {  # pragma: no cover - a change to one only
    name: (spec.decision.value, spec.message_field())
    for name, spec in EVENTS.items()
    if spec.can_block
} != event_names.BLOCKING_EVENTS:
    raise AssertionError("event_names.BLOCKING_EVENTS does not say how the events block")


def event_spec(name: str) -> EventSpec:
    spec = EVENTS.get(name)
    if spec is None:
        raise UnknownEvent(name, EVENTS)
    return spec


def suggest_event(name: str) -> str | None:
    """The known event an unknown name most likely meant, if any."""
    if name in event_names.EVENT_ALIASES:
        return event_names.EVENT_ALIASES[name]
    folded = {n.lower(): n for n in EVENTS}
    base = name.split(":", 1)[0]
    return folded.get(name.lower()) or folded.get(base.lower())


def neutral_answer(event: str) -> dict[str, Any]:
    """The answer when no hook runs (gate closed): allow / continue / nothing."""
    spec = event_spec(event)
    if spec.decision is Decision.PERMISSION:
        return {"permission": "allow"}
    if spec.decision is Decision.CONTINUE:
        return {"continue": True}
    return {}


# ---------------------------------------------------------------------- payloads we can keep

#: how deep a payload may nest (objects and arrays together); a deeper one is refused, since
#: its records could not be encoded (and no agent sends one)
MAX_PAYLOAD_DEPTH = 64
#: fields that name something (ids, event, paths): a NUL in them is refused, since file
#: names, container labels and the engine cannot hold one
NAME_FIELDS = (
    "conversation_id", "generation_id", "hook_event_name", "workspace_roots", "transcript_path",
    "agent_transcript_path", "cwd", "file_path", "tool_use_id", "subagent_id",
    "parent_conversation_id", "tool_call_id", "session_id",
)  # fmt: skip
_SHOWN_PATH = 80


def payload_problem(document: Any) -> str | None:
    """Why a decoded payload cannot be kept as it is, or None.

    Refused: nesting deeper than `MAX_PAYLOAD_DEPTH`; a lone UTF-16 surrogate (`\\ud800`)
    anywhere, key or value (it has no UTF-8 encoding, so neither records, session state
    nor hooks' environments could hold it); a NUL in one of `NAME_FIELDS`. Iterative, so a
    payload nested thousands deep costs no recursion.
    """
    stack: list[tuple[Any, str, int]] = [(document, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= MAX_PAYLOAD_DEPTH:
                return (
                    f"nested deeper than {MAX_PAYLOAD_DEPTH} levels (at {_shown(where)}); "
                    "send a flatter payload"
                )
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and not _encodable(key):
                    return (
                        f"a key under {_shown(where)} holds a lone UTF-16 surrogate, "
                        "which has no UTF-8 encoding; send valid Unicode text"
                    )
                path = (
                    f"{where}.{key}"
                    if where and isinstance(key, str)
                    else (f"{where}[{key}]" if where else str(key))
                )
                stack.append((item, path, depth + 1))
        elif isinstance(value, str) and not _encodable(value):
            return (
                f"{_shown(where)} holds a lone UTF-16 surrogate, which has no UTF-8 "
                "encoding; send valid Unicode text"
            )
    if isinstance(document, dict):
        for name in NAME_FIELDS:
            value = document.get(name)
            texts = value if isinstance(value, list) else [value]
            if any(isinstance(text, str) and "\x00" in text for text in texts):
                return f"`{name}` holds a NUL character; ids and paths cannot hold one"
    return None


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(where: str) -> str:
    if not where:
        return "the top level"
    short = where if len(where) <= _SHOWN_PATH else where[: _SHOWN_PATH - 3] + "..."
    # keys are the sender's text: shown escaped, so the message stays one line
    return f"`{short.encode('unicode_escape').decode('ascii')}`"
