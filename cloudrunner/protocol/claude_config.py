"""Claude Code settings files (`.claude/settings.json` and friends) read as hooks files.

`parse_claude_settings` reads Claude Code's form exactly,
`hooks.<Event>[] = {matcher, hooks: [{type, command, args, timeout, ...}]}`, and returns the
same `HooksFile` model as `config.parse_hooks_file`: entries keyed by the Cursor event each
Claude event runs on (`claude_mapping.CLAUDE_EVENTS`), each marked with its Claude origin
(`HookEntry.claude`). The rules are the Cursor loader's: wrong types and invalid JSON disable
the file (an error with file, JSON pointer and line); hooks that cannot run (another `type`, an
event with no Cursor equivalent, an `async` hook) are left out with an info diagnostic saying
why; unknown keys in the hooks part are warnings. Keys of the settings file that are not about
hooks (`permissions`, `env`, `model`, ...) are Claude Code's business and pass silently.

Matchers follow Claude Code: none, empty or `*` match everything; a matcher made only of
letters, digits, `_` and `|` is a list of exact names; anything else is a regular expression
(ECMAScript, the same bounded engine as Cursor matchers) searched anywhere in the name.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from typing import Any

from cloudrunner.protocol.config import (
    DEFAULT_LOOP_LIMIT,
    SUSPICIOUS_TIMEOUT,
    ClaudeHook,
    HookDefinition,
    HookEntry,
    HooksFile,
    ParseResult,
    _Collector,
    describe,
    parse_json_file,
)
from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import error, info, pointer_join
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.matchers import CompiledMatcher, compile_matcher

from .claude_mapping import CLAUDE_EVENTS, HOOK_KEYS

_EXACT = re.compile(r"[A-Za-z0-9_|]+")
_PROJECT_VARIABLES = ("$CLAUDE_PROJECT_DIR", "${CLAUDE_PROJECT_DIR}")
_RUNNABLE_SHELLS = ("bash", "sh")
_GROUP_KEYS = frozenset({"matcher", "hooks"})


@functools.lru_cache(maxsize=1024)
def compile_claude_matcher(source: str | None) -> CompiledMatcher:
    """A Claude matcher as a `CompiledMatcher` whose `source` is the matcher as written."""
    if source is None or source in ("", "*"):
        return compile_matcher(source)
    if _EXACT.fullmatch(source):
        names = [n for n in source.split("|") if n]
        if not names:
            return CompiledMatcher(source, None, "the matcher names no tool")
        compiled = compile_matcher("^(?:" + "|".join(names) + ")$")
    else:
        compiled = compile_matcher(source)
    return CompiledMatcher(source, compiled.pattern, compiled.error, compiled.translation)


def exec_command(argv: tuple[str, ...]) -> str:
    """The exec form as the sandbox's `/bin/sh -c` runs it: `exec` with every word quoted,
    so the program gets exactly these arguments (no expansion, no globbing); a word that
    starts with `$CLAUDE_PROJECT_DIR` keeps that variable (it has no shell to expand it
    otherwise)."""
    words = []
    for word in argv:
        for variable in _PROJECT_VARIABLES:
            if word.startswith(variable):
                rest = word[len(variable) :]
                words.append('"$CLAUDE_PROJECT_DIR"' + (shlex.quote(rest) if rest else ""))
                break
        else:
            words.append(shlex.quote(word))
    return "exec " + " ".join(words)


def parse_claude_settings(data: bytes, *, file: str) -> ParseResult:
    """Parse the hooks of one Claude Code settings file. Never raises for bad input."""
    return parse_json_file(data, file=file, read=_document)


def _document(document: Any, c: _Collector) -> HooksFile | None:
    if not isinstance(document, dict):
        c.fail(
            DiagnosticCode.NOT_AN_OBJECT,
            f"a Claude Code settings file must be a JSON object, not {describe(document)}",
        )
        return None
    if document.get("disableAllHooks") is True:
        c.add(
            info(
                DiagnosticCode.HOOKS_DISABLED,
                "`disableAllHooks` is true, so none of this file's hooks load",
                file=c.file,
                pointer="/disableAllHooks",
            )
        )
        return HooksFile(1, {})
    if "hooks" not in document:
        c.add(
            info(DiagnosticCode.NO_HOOKS, "the file has no `hooks` object", file=c.file, pointer="")
        )
        return HooksFile(1, {})
    hooks = document["hooks"]
    if not isinstance(hooks, dict):
        c.fail(
            DiagnosticCode.WRONG_TYPE,
            "`hooks` must be an object mapping Claude event names to arrays of "
            f"{{matcher, hooks}} groups, not {describe(hooks)}",
            "/hooks",
        )
        return None
    events: dict[str, list[HookEntry]] = {}
    for name, groups in hooks.items():
        pointer = pointer_join("/hooks", name)
        event = CLAUDE_EVENTS.get(name)
        if event is None:
            hint = "; Cursor's own event names go in .cursor/hooks.json" if name in EVENTS else ""
            c.warn(
                DiagnosticCode.UNKNOWN_EVENT,
                f"unknown Claude Code event {name!r}: its hooks are ignored{hint}",
                pointer,
                at_key=True,
            )
            continue
        if not isinstance(groups, list):
            c.fail(
                DiagnosticCode.WRONG_TYPE,
                f"the value of {name!r} must be an array of {{matcher, hooks}} groups, "
                f"not {describe(groups)}",
                pointer,
            )
            continue
        if event.cursor is None:
            if groups:
                c.add(
                    info(
                        DiagnosticCode.HOOK_SKIPPED,
                        f"{name} hooks never run here: {event.unmapped_reason}",
                        file=c.file,
                        pointer=pointer,
                    )
                )
            _check_groups(name, groups, c, keep=None)
            continue
        _check_groups(name, groups, c, keep=events.setdefault(event.cursor, []))
    return HooksFile(1, {k: tuple(v) for k, v in events.items() if v})


def _check_groups(
    name: str, groups: list[Any], c: _Collector, keep: list[HookEntry] | None
) -> None:
    for g, group in enumerate(groups):
        where = pointer_join("/hooks", name, g)
        if not isinstance(group, dict):
            c.fail(
                DiagnosticCode.WRONG_TYPE,
                f"a {name} entry must be an object {{matcher, hooks}}, not {describe(group)}",
                where,
            )
            continue
        for key in group:
            if key not in _GROUP_KEYS:
                hint = " (put it in each hook of `hooks`)" if key in HOOK_KEYS else ""
                c.warn(DiagnosticCode.UNKNOWN_KEY, f"unknown key {key!r} is ignored{hint}",
                       pointer_join(where, key), at_key=True)  # fmt: skip
        matcher = group.get("matcher")
        if matcher is not None and not isinstance(matcher, str):
            c.fail(DiagnosticCode.WRONG_TYPE,
                   f"`matcher` must be a string, not {describe(matcher)}",
                   pointer_join(where, "matcher"))  # fmt: skip
            continue
        inner = group.get("hooks")
        if not isinstance(inner, list):
            hint = " (Claude Code's form nests the commands: {matcher, hooks: [...]})"
            c.fail(
                DiagnosticCode.WRONG_TYPE,
                f"`hooks` of a {name} entry must be an array of hooks, not "
                f"{describe(inner) if 'hooks' in group else 'missing'}{hint}",
                pointer_join(where, "hooks") if "hooks" in group else where,
            )
            continue
        for h, hook in enumerate(inner):
            entry = _hook(name, matcher, pointer_join(where, "hooks", h), hook, c)
            if entry is not None and keep is not None:
                keep.append(_indexed(entry, len(keep)))


def _indexed(entry: HookEntry, index: int) -> HookEntry:
    return HookEntry(
        entry.event, index, entry.pointer, entry.definition, entry.matcher, entry.canonical,
        entry.claude,
    )  # fmt: skip


def _skip(c: _Collector, pointer: str, why: str) -> None:
    c.add(
        info(DiagnosticCode.HOOK_SKIPPED, f"hook not loaded: {why}", file=c.file, pointer=pointer)
    )


def _hook(
    name: str, matcher: str | None, pointer: str, hook: Any, c: _Collector
) -> HookEntry | None:
    if not isinstance(hook, dict):
        c.fail(
            DiagnosticCode.WRONG_TYPE, f"a hook must be an object, not {describe(hook)}", pointer
        )
        return None
    kind = hook.get("type")
    if not isinstance(kind, str):
        c.fail(
            DiagnosticCode.WRONG_TYPE,
            f'`type` must be a string ("command", "prompt", "agent" or "http"), not '
            f"{describe(kind) if 'type' in hook else 'missing'}",
            pointer_join(pointer, "type") if "type" in hook else pointer,
        )
        return None
    for key in hook:
        if key not in HOOK_KEYS and key not in ("prompt", "model", "url", "headers",
                                                "allowedEnvVars"):  # fmt: skip
            c.warn(DiagnosticCode.UNKNOWN_KEY, f"unknown key {key!r} is ignored",
                   pointer_join(pointer, key), at_key=True)  # fmt: skip
    if kind != "command":
        _skip(c, pointer, f"{kind} hooks are not command hooks; only command hooks run")
        return None
    timeout = hook.get("timeout")
    if "timeout" in hook and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        c.fail(DiagnosticCode.WRONG_TYPE, f"`timeout` must be a positive number of seconds, not "
               f"{describe(timeout)}", pointer_join(pointer, "timeout"))  # fmt: skip
        return None
    command = hook.get("command")
    if not isinstance(command, str) or not command.strip():
        c.fail(
            "missing-command" if command is None else "wrong-type",
            "a command hook needs a non-empty `command` string"
            + (f", not {describe(command)}" if command is not None else ""),
            pointer_join(pointer, "command") if "command" in hook else pointer,
        )
        return None
    argv: tuple[str, ...] | None = None
    if "args" in hook:
        args = hook["args"]
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            c.fail(DiagnosticCode.WRONG_TYPE,
                   f"`args` must be an array of strings, not {describe(args)}",
                   pointer_join(pointer, "args"))  # fmt: skip
            return None
        argv = (command, *args)
    if hook.get("async") is True:
        _skip(c, pointer, "`async` hooks run in the background in Claude Code and cannot "
              "change the answer; cloudrunner runs no background hooks")  # fmt: skip
        return None
    shell = hook.get("shell")
    if shell is not None and shell not in _RUNNABLE_SHELLS:
        _skip(c, pointer, f"`shell` {describe(shell)} is not available in the sandbox "
              "(bash or sh only)")  # fmt: skip
        return None
    for key in ("statusMessage", "once"):
        if key in hook:
            c.add(info(DiagnosticCode.IGNORED_KEY, f"`{key}` is ignored: {HOOK_KEYS[key]}",
                       file=c.file, pointer=pointer_join(pointer, key)))  # fmt: skip
    if isinstance(timeout, int | float) and timeout > SUSPICIOUS_TIMEOUT:
        c.warn(DiagnosticCode.LONG_TIMEOUT,
               f"timeout {timeout:g} s is over an hour; `timeout` is in seconds",
               pointer_join(pointer, "timeout"))  # fmt: skip
    compiled = compile_claude_matcher(matcher)
    event = CLAUDE_EVENTS[name]
    if matcher not in (None, "", "*") and event.subject is None:
        c.warn(DiagnosticCode.MATCHER_IGNORED,
               f"{name} takes no matcher, so `matcher` does not filter",
               pointer_join(pointer.rsplit("/hooks/", 1)[0], "matcher"))  # fmt: skip
    if compiled.error is not None:
        c.add(
            error(
                DiagnosticCode.INVALID_MATCHER,
                f"matcher {matcher!r} is not a valid regular expression ({compiled.error}): "
                "its hooks never run",
                file=c.file,
                pointer=pointer_join(pointer.rsplit("/hooks/", 1)[0], "matcher"),
            )
        )
    if event.cursor is None:
        return None
    line = command if argv is None else exec_command(argv)
    definition = HookDefinition.model_validate(
        {
            "command": line,
            "type": "command",
            "timeout": float(timeout) if isinstance(timeout, int | float) else None,
            "matcher": matcher,
            "loop_limit": DEFAULT_LOOP_LIMIT,
        }
    )
    canonical = json.dumps(
        {"claude_event": name, "matcher": matcher, "hook": hook}, sort_keys=True,
        ensure_ascii=False,
    )  # fmt: skip
    return HookEntry(
        event.cursor, 0, pointer, definition, compiled, canonical, ClaudeHook(name, argv)
    )
