"""The hooks.json model (spec section 1) and the parser that turns bytes into it.

`parse_hooks_file` never raises for bad input: it returns the model (or None when the file
cannot be used at all) and the diagnostics. The rules, from the spec's Decisions:

- unknown top-level keys, unknown per-hook keys and unknown event names are warnings;
- invalid JSON and wrong types are errors that disable the whole file (the caller's source),
  because running part of a security configuration could be worse than running none of it
  (the other sources still run);
- an invalid matcher regex is an error of that hook only: the hook is kept, marked, and never
  runs (and blocks every event of its type when failClosed), as section 4 says;
- an event whose value is a single object instead of an array is a wrong type (the spec says
  "array of hook definitions"; the message says how to fix it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import (
    Diagnostic,
    Severity,
    error,
    info,
    pointer_join,
    warning,
)
from cloudrunner.protocol.event_names import STOP, SUBAGENT_STOP
from cloudrunner.protocol.events import EVENTS, suggest_event
from cloudrunner.protocol.jsonpos import PositionIndex
from cloudrunner.protocol.matchers import CompiledMatcher, compile_matcher

KNOWN_VERSION = 1
#: the follow-up budget a stop/subagentStop script gets when it does not say (spec section 1)
DEFAULT_LOOP_LIMIT = 5
#: above this a timeout is almost certainly milliseconds written as seconds
SUSPICIOUS_TIMEOUT = 3600


class HookDefinition(BaseModel):
    """One entry of an event's list. Unknown keys are kept (in `model_extra`) and warned."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True, populate_by_name=True)

    command: str | None = None
    type: Literal["command", "prompt"] = "command"
    #: seconds; None = the worker's default
    timeout: float | None = Field(default=None, gt=0)
    matcher: str | None = None
    #: None = unlimited
    loop_limit: int | None = Field(default=DEFAULT_LOOP_LIMIT, ge=0)
    fail_closed: bool = Field(default=False, alias="failClosed")
    prompt: str | None = None
    model: str | None = None


KNOWN_HOOK_KEYS = frozenset(
    {"command", "type", "timeout", "matcher", "loop_limit", "failClosed", "prompt", "model"}
)

_EXPECTED = {
    "command": "a string (the command line to run)",
    "type": 'either "command" or "prompt"',
    "timeout": "a positive number of seconds",
    "matcher": "a string (a regular expression)",
    "loop_limit": "a non-negative integer, or null for unlimited",
    "failClosed": "true or false",
    "prompt": "a string",
    "model": "a string",
}

_KEY_HINTS = {
    "timeoutSec": "cloudrunner reads only `timeout`, in seconds",
    "timeoutMs": "cloudrunner reads only `timeout`, in seconds",
    "timeout_ms": "cloudrunner reads only `timeout`, in seconds",
    "timeoutSeconds": "cloudrunner reads only `timeout`, in seconds",
    "fail_closed": "did you mean `failClosed`?",
    "failclosed": "did you mean `failClosed`?",
    "loopLimit": "did you mean `loop_limit`?",
    "hooks": "this looks like Claude Code's nested {matcher, hooks: [...]} form; a Cursor "
    "hook entry is flat: put `command` (and `matcher`) in the entry itself",
}


@dataclass(frozen=True)
class ClaudeHook:
    """What a hook read from a Claude Code settings file keeps of Claude's form."""

    #: the Claude event it was written for (`PreToolUse`, `Stop`, ...)
    event: str
    #: exec form: the program and its arguments, run without a shell (None: a command line)
    argv: tuple[str, ...] | None = None


@dataclass(frozen=True)
class HookEntry:
    """A validated hook definition and where it sits in its file."""

    event: str
    #: position in the event's list in the file (file order)
    index: int
    pointer: str
    definition: HookDefinition
    matcher: CompiledMatcher
    #: the entry as canonical JSON: two entries are identical when these are equal
    canonical: str
    #: set for a hook read from a Claude Code settings file (`claude_config`)
    claude: ClaudeHook | None = None


@dataclass(frozen=True)
class HooksFile:
    version: float
    #: known events only, in file order; entries that failed validation are not here
    hooks: Mapping[str, tuple[HookEntry, ...]]


@dataclass(frozen=True)
class ParseResult:
    file: str
    #: None when the file has a file-level error (the source is disabled)
    config: HooksFile | None
    diagnostics: tuple[Diagnostic, ...]

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)


@dataclass
class _Collector:
    file: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: whether an error disables the whole file (all but invalid matchers do)
    fatal: bool = False
    #: pointers whose diagnostic should point at the key rather than the value
    key_pointers: set[str] = field(default_factory=set)

    def add(self, diagnostic: Diagnostic, *, at_key: bool = False) -> None:
        if diagnostic.pointer is not None and at_key:
            self.key_pointers.add(diagnostic.pointer)
        self.diagnostics.append(diagnostic)

    def fail(self, code: str, message: str, pointer: str | None = "", **where: Any) -> None:
        self.fatal = True
        self.add(error(code, message, file=self.file, pointer=pointer, **where))

    def warn(self, code: str, message: str, pointer: str, *, at_key: bool = False) -> None:
        self.add(warning(code, message, file=self.file, pointer=pointer), at_key=at_key)


def describe(value: Any) -> str:
    """A JSON value as a message shows it: its JSON type and a short rendering."""
    kind = {
        bool: "boolean",
        int: "number",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{kind} {text}"


class _DuplicateKeys:
    """An object_pairs_hook that notices repeated keys (json.loads keeps the last one)."""

    def __init__(self) -> None:
        self.found = False

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):
            self.found = True
        return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _syntax_hint(text: str, pos: int) -> str:
    rest = text[pos:].lstrip()
    if rest.startswith(("//", "/*", "#")):
        return " (hooks.json must be strict JSON: comments are not allowed)"
    before = text[:pos].rstrip()
    if before.endswith(",") and rest[:1] in ("}", "]"):
        return " (hooks.json must be strict JSON: remove the trailing comma)"
    return ""


def _decode(data: bytes, c: _Collector) -> str | None:
    try:
        # utf-8-sig: a byte-order mark is harmless, so accept it rather than reject the file
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        c.fail(
            DiagnosticCode.NOT_UTF8,
            f"the file is not UTF-8 text (invalid byte 0x{data[exc.start]:02x}); save it as UTF-8",
            line=line,
            column=column,
        )
        return None
    if not text.strip():
        c.fail(
            DiagnosticCode.EMPTY_FILE,
            'the file is empty; a hooks file is a JSON object like {"version": 1, "hooks": {}}',
        )
        return None
    return text


def _load_json(text: str, c: _Collector) -> tuple[Any, bool] | None:
    dupes = _DuplicateKeys()
    try:
        return json.loads(
            text, object_pairs_hook=dupes, parse_constant=_reject_constant
        ), dupes.found
    except json.JSONDecodeError as exc:
        c.fail(
            DiagnosticCode.JSON_SYNTAX,
            f"invalid JSON: {exc.msg}{_syntax_hint(text, exc.pos)}",
            pointer=None,
            line=exc.lineno,
            column=exc.colno,
        )
    except ValueError as exc:  # NaN / Infinity
        c.fail(DiagnosticCode.JSON_SYNTAX, f"invalid JSON: {exc}", pointer=None)
    except RecursionError:
        c.fail(
            DiagnosticCode.TOO_DEEP,
            "the JSON is nested too deeply to be a hooks file",
            pointer=None,
        )
    return None


def parse_hooks_file(data: bytes, *, file: str) -> ParseResult:
    """Parse and validate one hooks file. Never raises for bad input."""
    return parse_json_file(data, file=file, read=_document)


def parse_json_file(
    data: bytes, *, file: str, read: Callable[[Any, _Collector], HooksFile | None]
) -> ParseResult:
    """Decode and parse a JSON hooks file and let `read` turn the document into the model
    (the Cursor form, or Claude Code's in `claude_config`), with located diagnostics."""
    c = _Collector(file)
    text = _decode(data, c)
    loaded = _load_json(text, c) if text is not None else None
    config: HooksFile | None = None
    if loaded is not None:
        document, has_duplicates = loaded
        config = read(document, c)
        if has_duplicates and text is not None:
            _warn_duplicates(text, c)
    if c.fatal:
        config = None
    diagnostics = _locate(text, c) if text is not None and loaded is not None else c.diagnostics
    return ParseResult(file, config, tuple(diagnostics))


def _warn_duplicates(text: str, c: _Collector) -> None:
    for pointer, line, column in PositionIndex(text).duplicates:
        key = pointer.rsplit("/", 1)[1].replace("~1", "/").replace("~0", "~")
        c.add(
            warning(
                DiagnosticCode.DUPLICATE_KEY,
                f"key {key!r} appears more than once in the same object; the last one wins",
                file=c.file,
                pointer=pointer,
                line=line,
                column=column,
            )
        )


def _locate(text: str, c: _Collector) -> list[Diagnostic]:
    if not any(d.pointer is not None and d.line is None for d in c.diagnostics):
        return c.diagnostics
    index = PositionIndex(text)
    out = []
    for d in c.diagnostics:
        if d.pointer is not None and d.line is None:
            found = index.find(d.pointer, key=d.pointer in c.key_pointers)
            if found is not None:
                d = d.located(*found)
        out.append(d)
    return out


def _document(document: Any, c: _Collector) -> HooksFile | None:
    if not isinstance(document, dict):
        c.fail(
            DiagnosticCode.NOT_AN_OBJECT,
            "a hooks file must be a JSON object with `version` and `hooks`, "
            f"not {describe(document)}",
        )
        return None
    version: float = KNOWN_VERSION
    if "version" in document:
        raw = document["version"]
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            c.fail(
                DiagnosticCode.WRONG_TYPE,
                f"`version` must be the number 1, not {describe(raw)}",
                "/version",
            )
        else:
            version = raw
            if raw != KNOWN_VERSION:
                c.warn(
                    DiagnosticCode.UNKNOWN_VERSION,
                    f"version {raw} is not known (only 1 is); the file is read as version 1",
                    "/version",
                )
    for key in document:
        if key in ("version", "hooks", "$schema"):
            continue
        pointer = pointer_join("", key)
        if key in EVENTS:
            c.warn(
                DiagnosticCode.EVENT_AT_TOP_LEVEL,
                f"event {key!r} is at the top level and is ignored; move it inside `hooks`",
                pointer,
                at_key=True,
            )
        else:
            c.warn(
                DiagnosticCode.UNKNOWN_KEY,
                f"unknown top-level key {key!r} is ignored",
                pointer,
                at_key=True,
            )
    if "hooks" not in document:
        c.warn(
            DiagnosticCode.NO_HOOKS, "the file has no `hooks` object, so it defines no hooks", ""
        )
        return HooksFile(version, {})
    hooks = document["hooks"]
    if not isinstance(hooks, dict):
        c.fail(
            DiagnosticCode.WRONG_TYPE,
            "`hooks` must be an object mapping event names to arrays of hooks, "
            f"not {describe(hooks)}",
            "/hooks",
        )
        return None
    events: dict[str, tuple[HookEntry, ...]] = {}
    for event, value in hooks.items():
        pointer = pointer_join("/hooks", event)
        if event not in EVENTS:
            guess = suggest_event(event)
            hint = f"; did you mean {guess!r}?" if guess else ""
            if ":" in event and guess:
                hint += " (filter by tool with `matcher`, not in the event name)"
            c.warn(
                DiagnosticCode.UNKNOWN_EVENT,
                f"unknown event {event!r}: its hooks are ignored{hint}",
                pointer,
                at_key=True,
            )
            continue
        if not isinstance(value, list):
            hint = (
                "; wrap the single hook in an array: [ {...} ]" if isinstance(value, dict) else ""
            )
            c.fail(
                DiagnosticCode.WRONG_TYPE,
                f"the value of {event!r} must be an array of hook definitions, "
                f"not {describe(value)}{hint}",
                pointer,
            )
            continue
        entries = [e for i, item in enumerate(value) if (e := _entry(event, i, item, c))]
        events[event] = tuple(entries)
    return HooksFile(version, events)


def _entry(event: str, index: int, item: Any, c: _Collector) -> HookEntry | None:
    pointer = pointer_join("/hooks", event, index)
    if not isinstance(item, dict):
        c.fail(
            DiagnosticCode.WRONG_TYPE,
            f"a hook definition must be an object, not {describe(item)}",
            pointer,
        )
        return None
    try:
        definition = HookDefinition.model_validate(item)
    except ValidationError as exc:
        for problem in exc.errors():
            loc = problem["loc"]
            name = str(loc[0]) if loc else ""
            where = pointer_join(pointer, name) if name else pointer
            expected = _EXPECTED.get(name)
            given = item.get(name)
            message = (
                f"`{name}` must be {expected}, not {describe(given)}"
                if expected
                else f"{problem['msg']}"
            )
            c.fail(DiagnosticCode.WRONG_TYPE, message, where)
        return None
    spec = EVENTS[event]
    extras = definition.model_extra or {}
    for key in extras:
        hint = _KEY_HINTS.get(key)
        c.warn(
            DiagnosticCode.UNKNOWN_KEY,
            f"unknown key {key!r} is ignored" + (f" ({hint})" if hint else ""),
            pointer_join(pointer, key),
            at_key=True,
        )
    if definition.type == "command":
        if definition.command is None:
            nested = (
                " (it looks like Claude Code's nested form: flatten it)"
                if "hooks" in extras
                else ""
            )
            c.fail(
                DiagnosticCode.MISSING_COMMAND,
                f"a command hook needs a `command` string{nested}",
                pointer,
            )
            return None
        if not definition.command.strip():
            c.fail(
                DiagnosticCode.EMPTY_COMMAND,
                "`command` is empty; give the command line to run",
                pointer_join(pointer, "command"),
            )
            return None
        for key in ("prompt", "model"):
            if key in item:
                c.warn(
                    DiagnosticCode.IGNORED_KEY,
                    f"`{key}` only applies to prompt hooks and is ignored here",
                    pointer_join(pointer, key),
                    at_key=True,
                )
    else:
        if not (definition.prompt or "").strip():
            c.fail(
                DiagnosticCode.MISSING_PROMPT,
                "a prompt hook needs a non-empty `prompt` string",
                pointer,
            )
            return None
        if "command" in item:
            c.warn(
                DiagnosticCode.IGNORED_KEY,
                "`command` is ignored on a prompt hook",
                pointer_join(pointer, "command"),
                at_key=True,
            )
    if "loop_limit" in item and not spec.follows_up:
        c.warn(
            DiagnosticCode.LOOP_LIMIT_IGNORED,
            f"`loop_limit` only applies to {STOP} and {SUBAGENT_STOP}; it has no effect on {event}",
            pointer_join(pointer, "loop_limit"),
            at_key=True,
        )
    if definition.fail_closed and not spec.can_block:
        c.warn(
            DiagnosticCode.FAIL_CLOSED_IGNORED,
            f"`failClosed` has no effect on {event}: "
            "the event takes no decision, so there is nothing to block",
            pointer_join(pointer, "failClosed"),
            at_key=True,
        )
    if definition.timeout is not None and definition.timeout > SUSPICIOUS_TIMEOUT:
        c.warn(
            DiagnosticCode.LONG_TIMEOUT,
            f"timeout {definition.timeout:g} s is over an hour; "
            "`timeout` is in seconds, not milliseconds",
            pointer_join(pointer, "timeout"),
        )
    matcher = compile_matcher(definition.matcher)
    if definition.matcher not in (None, "", "*") and spec.matcher_subject is None:
        c.warn(
            DiagnosticCode.MATCHER_IGNORED,
            f"{event} has no matcher field, so `matcher` does not filter: "
            f"the hook runs on every {event}",
            pointer_join(pointer, "matcher"),
        )
    if matcher.error is not None:
        consequence = (
            f"it never runs, and because it is failClosed it blocks every {event} event"
            if definition.fail_closed and spec.can_block
            else "it never runs"
        )
        c.add(
            error(
                DiagnosticCode.INVALID_MATCHER,
                f"matcher {definition.matcher!r} is not a valid regular expression "
                f"({matcher.error}): {consequence}",
                file=c.file,
                pointer=pointer_join(pointer, "matcher"),
            )
        )
    canonical = json.dumps(item, sort_keys=True, ensure_ascii=False)
    return HookEntry(event, index, pointer, definition, matcher, canonical)


__all__ = [
    "DEFAULT_LOOP_LIMIT",
    "KNOWN_HOOK_KEYS",
    "HookDefinition",
    "HookEntry",
    "HooksFile",
    "ParseResult",
    "Severity",
    "info",
    "parse_hooks_file",
]
