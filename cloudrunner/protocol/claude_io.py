"""A Claude Code hook's input and answer, translated from and to Cursor's (pure functions).

`claude_input` builds the JSON Claude Code would give the hook (`session_id`,
`transcript_path`, `cwd`, `hook_event_name` in Claude's spelling, `tool_name`, `tool_input`,
...) from the Cursor event. `translate_answer` reads what the hook answered as Claude Code
reads it (exit code 2 with stderr, `continue`/`stopReason`, `decision`/`reason`,
`hookSpecificOutput`, `systemMessage`, plain stdout) and writes the Cursor answer it means;
what has no Cursor equivalent on the event is named, never dropped silently.
`classify_claude` is `results.classify` for such a hook: its outcome and reason say what was
translated and what could not be.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cloudrunner.protocol.event_names import (
    BEFORE_SUBMIT_PROMPT,
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
)
from cloudrunner.protocol.events import Decision, EventInput, EventSpec
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.results import (
    Execution,
    ExecutionStatus,
    HookResult,
    _InvalidOutput,
    _stderr_text,
    classify,
    parse_output,
)

from .claude_mapping import BY_CURSOR_EVENT, CLAUDE_EVENTS, claude_tool_name

if TYPE_CHECKING:
    from cloudrunner.protocol.plan import Plan
    from cloudrunner.protocol.planned_hook import PlannedHook


# ----------------------------------------------------------------------------- input


def _decoded(value: Any) -> Any:
    """A JSON string decoded (Cursor gives MCP tool input and some outputs as JSON text)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _tool_response(claude_tool: str | None, output: Any) -> Any:
    """Cursor's `tool_output` as Claude's `tool_response`: JSON text decoded; a shell's plain
    output in the object Claude Code gives for Bash (`stdout`, `stderr`, `interrupted`)."""
    decoded = _decoded(output)
    if claude_tool == "Bash" and isinstance(decoded, str):
        return {"stdout": decoded, "stderr": "", "interrupted": False, "isImage": False}
    return decoded


#: the Claude events whose input carries `last_assistant_message` (read from the transcript)
LAST_MESSAGE_EVENTS = frozenset({CLAUDE_STOP})


def claude_input(
    claude_event: str,
    payload: EventInput,
    project_dir: str,
    last_assistant_message: str | None = None,
) -> dict[str, Any]:
    """The stdin document Claude Code gives a hook of `claude_event`, from Cursor's payload
    (and, for `Stop`, the transcript's last assistant message when the worker could read it:
    Cursor's `stop` does not carry it)."""
    get = payload.__dict__.get
    out: dict[str, Any] = {
        "session_id": payload.conversation_id or "",
        "transcript_path": payload.transcript_path,
        "cwd": get("cwd") or project_dir,
        "hook_event_name": claude_event,
    }
    if claude_event in (CLAUDE_PRE_TOOL_USE, CLAUDE_POST_TOOL_USE, CLAUDE_POST_TOOL_USE_FAILURE):
        tool_input = _decoded(get("tool_input"))
        out["tool_name"] = claude_tool_name(get("tool_name"), tool_input)
        out["tool_input"] = tool_input if tool_input is not None else {}
        if get("tool_use_id") is not None:
            out["tool_use_id"] = get("tool_use_id")
        if claude_event == CLAUDE_POST_TOOL_USE:
            out["tool_response"] = _tool_response(out["tool_name"], get("tool_output"))
        if claude_event == CLAUDE_POST_TOOL_USE_FAILURE:
            out["error"] = get("error_message") or ""
            out["is_interrupt"] = bool(get("is_interrupt"))
    elif claude_event == CLAUDE_USER_PROMPT_SUBMIT:
        out["prompt"] = get("prompt") or ""
    elif claude_event in (CLAUDE_STOP, CLAUDE_SUBAGENT_STOP):
        out["stop_hook_active"] = bool(get("loop_count") or 0)
        if claude_event in LAST_MESSAGE_EVENTS and last_assistant_message is not None:
            out["last_assistant_message"] = last_assistant_message
        if claude_event == CLAUDE_SUBAGENT_STOP:
            out["agent_type"] = get("subagent_type") or ""
            out["agent_transcript_path"] = get("agent_transcript_path")
    elif claude_event == CLAUDE_SUBAGENT_START:
        out["agent_id"] = get("subagent_id") or ""
        out["agent_type"] = get("subagent_type") or ""
    elif claude_event == CLAUDE_SESSION_START:
        out["source"] = "startup"
        if payload.model:
            out["model"] = payload.model
    elif claude_event == CLAUDE_SESSION_END:
        out["reason"] = get("reason") or "other"
    elif claude_event == CLAUDE_PRE_COMPACT:
        out["trigger"] = get("trigger") or "auto"
        out["custom_instructions"] = ""
    return out


def wants_last_message(plan: Plan) -> bool:
    """Whether a hook of the plan is a Claude hook whose input carries the transcript's last
    assistant message (so the transcript is read at most once, and only then)."""
    return any(
        hook.entry.claude is not None and hook.entry.claude.event in LAST_MESSAGE_EVENTS
        for hook in plan.hooks_to_run
    )


def claude_stdin(plan: Plan, hook: PlannedHook, last_assistant_message: str | None = None) -> bytes:
    """What a hook gets on stdin: the event's bytes, or Claude's document for a Claude hook."""
    claude = hook.entry.claude
    if claude is None:
        return plan.payload_bytes
    document = claude_input(
        claude.event, plan.payload, str(hook.working_dir), last_assistant_message
    )
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


# ----------------------------------------------------------------------------- answer


def prompt_context_dropped(what: str) -> str:
    """Why a UserPromptSubmit hook's context (plain stdout, `additionalContext`) is not in
    the answer, stated as Claude Code would have used it (the hooks spec's decision)."""
    return (
        f"{what} (Claude Code adds a {CLAUDE_USER_PROMPT_SUBMIT} hook's {what} to the model's "
        f"context with the prompt; Cursor's {BEFORE_SUBMIT_PROMPT} answer carries only "
        "continue and user_message, no context for the model, so it is dropped)"
    )


@dataclass
class Translated:
    """A Claude answer as a Cursor answer."""

    answer: dict[str, Any] = field(default_factory=dict)
    #: what was read and how it was mapped (for the outcome's reason)
    mapped: list[str] = field(default_factory=list)
    #: what could not be mapped on this event (reason and ignored fields)
    unmapped: list[str] = field(default_factory=list)
    #: stdout that is not a valid Claude answer (invalid_output)
    invalid: str | None = None


def _put(t: Translated, spec: EventSpec, key: str, value: Any, what: str) -> bool:
    """Set a Cursor output field if the event has it (first one wins); False when it has not."""
    if key not in spec.output_fields:
        t.unmapped.append(f"{what} (no `{key}` on {spec.name})")
        return False
    if key not in t.answer:
        t.answer[key] = value
        t.mapped.append(f"{what} -> {key}")
    return True


def _deny(t: Translated, spec: EventSpec, message: str | None, what: str) -> None:
    if spec.decision is Decision.PERMISSION:
        t.answer["permission"] = "deny"
        t.mapped.append(f"{what} -> permission deny")
        where = spec.message_field()
        if message and where and where not in t.answer:
            t.answer[where] = message
    elif spec.decision is Decision.CONTINUE:
        t.answer["continue"] = False
        t.mapped.append(f"{what} -> continue false")
        if message and "user_message" not in t.answer:
            t.answer["user_message"] = message
    else:
        t.unmapped.append(f"{what} ({spec.name} takes no decision)")


def _block(t: Translated, claude_event: str, spec: EventSpec, message: str, what: str) -> None:
    """Claude's "block" (exit 2 or `decision: block`) on one event."""
    if claude_event in (CLAUDE_STOP, CLAUDE_SUBAGENT_STOP):
        # Claude Code keeps the agent going with the reason as its next instruction
        _put(t, spec, "followup_message", message or "continue", what)
    elif claude_event in (CLAUDE_POST_TOOL_USE, CLAUDE_POST_TOOL_USE_FAILURE):
        # the tool already ran: Claude Code shows the reason to the model
        if message:
            _put(t, spec, "additional_context", message, what)
    elif spec.can_block:
        _deny(t, spec, message or None, what)
    else:
        t.unmapped.append(f"{what} ({claude_event} cannot block in Claude Code)")


def _ask(t: Translated, spec: EventSpec, message: str) -> None:
    """A top-level `decision: "ask"`: the hook wants a confirmation. The safer reading wins
    (the hooks spec's decision): `ask` where the event can ask, a block where it can only
    allow or deny (or continue or stop), never a pass."""
    what = "decision ask"
    if spec.decision is Decision.NONE:
        t.unmapped.append(f"{what} ({spec.name} takes no decision)")
        return
    if spec.decision is Decision.CONTINUE or "ask" not in spec.permissions or spec.ask_means_deny:
        _deny(t, spec, message or None, f"{what} ({spec.name} cannot ask: the safer reading)")
        return
    if t.answer.get("permission") != "deny":
        t.answer["permission"] = "ask"  # over an allow in the same answer: the safer reading
        t.mapped.append(f"{what} -> permission ask")
    if message:
        _put(t, spec, "user_message", message, "reason")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def translate_answer(
    claude_event: str, spec: EventSpec, exit_code: int, stdout: bytes, stderr: str
) -> Translated:
    """The Cursor answer of a Claude hook that exited with 0 or 2."""
    t = Translated()
    if exit_code == 2:
        _block(t, claude_event, spec, stderr, "exit code 2")
        return t
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        t.invalid = f"stdout is not UTF-8 (invalid byte at offset {exc.start})"
        return t
    if not text.strip():
        return t
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raw = None
    if not isinstance(raw, dict):
        # Claude Code adds plain stdout to the model's context on SessionStart and
        # UserPromptSubmit, and shows it in its transcript elsewhere
        if claude_event == CLAUDE_SESSION_START:
            _put(t, spec, "additional_context", text.strip(), "plain stdout")
        elif claude_event == CLAUDE_USER_PROMPT_SUBMIT:
            t.unmapped.append(prompt_context_dropped("plain stdout"))
        else:
            t.unmapped.append("plain stdout (not a JSON object; Claude Code only shows it)")
        return t
    _read_object(t, claude_event, spec, raw)
    return t


def _read_object(t: Translated, claude_event: str, spec: EventSpec, raw: dict[str, Any]) -> None:
    specific = raw.get("hookSpecificOutput")
    if specific is not None and not isinstance(specific, dict):
        t.invalid = "`hookSpecificOutput` must be an object"
        return
    specific = specific or {}
    named = specific.get("hookEventName")
    if named is not None and named != claude_event:
        t.unmapped.append(f"hookSpecificOutput for {named!r} (this is {claude_event})")
        specific = {}
    if raw.get("continue") is False:
        _deny(t, spec, _text(raw.get("stopReason")) or "stopped by a Claude Code hook",
              "continue false")  # fmt: skip
    decision = specific.get("permissionDecision")
    reason = _text(specific.get("permissionDecisionReason"))
    if decision is not None:
        if decision not in ("allow", "deny", "ask"):
            t.invalid = f"`permissionDecision` must be allow, deny or ask, not {decision!r}"
            return
        if claude_event != CLAUDE_PRE_TOOL_USE or spec.decision is not Decision.PERMISSION:
            t.unmapped.append(f"permissionDecision on {claude_event}")
        elif decision == "deny":
            _deny(t, spec, reason, "permissionDecision deny")
        else:
            t.answer.setdefault("permission", decision)
            t.mapped.append(f"permissionDecision {decision} -> permission {decision}")
            if reason:
                _put(t, spec, "user_message", reason, "permissionDecisionReason")
    old = raw.get("decision")
    if old is not None:
        if old not in ("block", "approve", "allow", "deny", "ask"):
            t.invalid = f"`decision` must be block, approve or ask, not {old!r}"
            return
        message = _text(raw.get("reason")) or ""
        if old in ("block", "deny"):
            _block(t, claude_event, spec, message, f"decision {old}")
        elif old == "ask":
            _ask(t, spec, message)
        elif spec.decision is Decision.PERMISSION and "permission" not in t.answer:
            t.answer["permission"] = "allow"
            t.mapped.append(f"decision {old} -> permission allow")
    updated = specific.get("updatedInput")
    if updated is not None:
        if not isinstance(updated, dict):
            t.invalid = "`updatedInput` must be an object"
            return
        if t.answer.get("permission") != "deny":
            _put(t, spec, "updated_input", updated, "updatedInput")
    context = _text(specific.get("additionalContext"))
    if (
        context
        and claude_event == CLAUDE_USER_PROMPT_SUBMIT
        and "additional_context" not in (spec.output_fields)
    ):
        t.unmapped.append(prompt_context_dropped("additionalContext"))
    elif context:
        _put(t, spec, "additional_context", context, "additionalContext")
    if "updatedMCPToolOutput" in specific:
        _put(t, spec, "updated_mcp_tool_output", specific["updatedMCPToolOutput"],
             "updatedMCPToolOutput")  # fmt: skip
    system = _text(raw.get("systemMessage"))
    if system:
        _put(t, spec, "user_message", system, "systemMessage")
    if raw.get("suppressOutput") is True:
        t.unmapped.append("suppressOutput (no transcript to hide it from)")
    if "stopReason" in raw and raw.get("continue") is not False:
        t.unmapped.append("stopReason without continue false")
    known = {"continue", "stopReason", "suppressOutput", "systemMessage", "decision", "reason",
             "hookSpecificOutput"}  # fmt: skip
    inner = {"hookEventName", "permissionDecision", "permissionDecisionReason", "updatedInput",
             "additionalContext", "updatedMCPToolOutput"}  # fmt: skip
    t.unmapped.extend(f"unknown field {k!r}" for k in raw if k not in known)
    t.unmapped.extend(f"unknown field 'hookSpecificOutput.{k}'" for k in specific if k not in inner)


def classify_claude(hook: PlannedHook, spec: EventSpec, execution: Execution) -> HookResult:
    """`results.classify` for a Claude Code hook. Never raises."""
    claude = hook.entry.claude
    if claude is None:
        return classify(hook, spec, execution)
    name = claude.event
    code = execution.exit_code
    if execution.status is not ExecutionStatus.OK or code not in (0, 2):
        result = classify(hook, spec, execution)
        return dataclasses.replace(result, reason=f"Claude Code {name} hook: {result.reason}")
    assert code is not None
    stderr = _stderr_text(execution.stderr)
    t = translate_answer(name, spec, code, execution.stdout, stderr)
    if t.invalid is not None:
        return HookResult(
            hook, Outcome.INVALID_OUTPUT, {}, f"Claude Code {name} hook: {t.invalid}", code,
            stderr, sandbox_cause=execution.cause,
        )  # fmt: skip
    try:
        output, _ = parse_output(spec, json.dumps(t.answer).encode("utf-8"))
    except _InvalidOutput as exc:
        return HookResult(
            hook, Outcome.INVALID_OUTPUT, {}, f"Claude Code {name} hook: translated, {exc}",
            code, stderr, sandbox_cause=execution.cause,
        )  # fmt: skip
    parts = [f"Claude Code {name} hook, exit code {code}"]
    if t.mapped:
        parts.append("mapped: " + "; ".join(t.mapped))
    if t.unmapped:
        parts.append("not mapped to Cursor's answer: " + "; ".join(t.unmapped))
    outcome = Outcome.BLOCKED if code == 2 else Outcome.OK
    reason = parts[0] + (": " + "; ".join(parts[1:]) if parts[1:] else "")
    return HookResult(
        hook, outcome, output, reason, code, stderr, tuple(t.unmapped),
        sandbox_cause=execution.cause,
    )  # fmt: skip


def cursor_event_of(claude_event: str) -> str | None:
    event = CLAUDE_EVENTS.get(claude_event)
    return event.cursor if event else None


def claude_event_of(cursor_event: str) -> str | None:
    event = BY_CURSOR_EVENT.get(cursor_event)
    return event.name if event else None
