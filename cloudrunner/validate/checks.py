"""Checks `validate` runs on each hook before any event: pure logic, no Docker.

- which programs a command starts (the first word of each simple command, or the interpreter
  of a script's shebang), to be looked up in the image's PATH (`image_programs`);
- a script run by path that is not executable, or whose shebang line ends in CR;
- a matcher that cannot match any value its event sends (a constant such as `Write`, the
  tool names of preToolUse, the subagent types of subagentStart);
- the note for an unknown event name: some Cursor builds drop the whole file.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cloudrunner import shell as shell_syntax
from cloudrunner.protocol.event_names import PRE_TOOL_USE
from cloudrunner.protocol.events import EVENTS, EventSpec
from cloudrunner.protocol.matchers import CompiledMatcher
from cloudrunner.workspace import RepoFileRefused, open_inside, resolves_inside

#: shell words that are not programs (dash and bash builtins, keywords)
SHELL_BUILTINS = frozenset((
    "alias", "bg", "break", "cd", "command", "continue", "echo", "eval", "exec", "exit",
    "export", "false", "fg", "getopts", "hash", "jobs", "kill", "local", "printf", "pwd", "read",
    "readonly", "return", "set", "shift", "source", "test", "times", "trap", "true", "type",
    "ulimit", "umask", "unalias", "unset", "wait", ".", ":", "[", "[[", "]]", "{", "}", "!",
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "in", "function", "time", "select",
))  # fmt: skip
#: prefixes that run the next word: `env X`, `exec X`, `command X`, `nohup X`
_RUNNERS = frozenset({"env", "exec", "command", "nohup", "time"})
_KEYWORDS = frozenset({"if", "then", "else", "elif", "while", "until", "do", "!", "{", "time"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: a word cloudrunner cannot resolve before the event (variables, home, placeholders, Windows)
_UNRESOLVABLE = re.compile(r"[$`~*?]|\{\{|^__|\\|^[A-Za-z]:|<|>")

#: tool names Cursor sends to preToolUse/postToolUse/postToolUseFailure (MCP tools: MCP:<name>)
TOOL_NAMES = (
    "Shell", "Read", "Write", "Grep", "Delete", "Task", "Glob", "LS", "StrReplace",
    "EditNotebook", "MultiEdit", "WebSearch", "WebFetch", "TodoWrite", "MCP:tool",
)  # fmt: skip
#: subagent_type values subagentStart/subagentStop send (built-in ones; custom ones exist)
SUBAGENT_TYPES = ("generalPurpose", "explore", "shell", "plan", "research")
#: names other agents use for what Cursor calls differently
_OTHER_AGENT_NAMES = {
    "Bash": "Cursor names its shell tool `Shell` (Bash is Claude Code's name)",
    "Edit": "Cursor names its edit tools `Write` / `StrReplace` (Edit is Claude Code's name)",
    "NotebookEdit": "Cursor names it `EditNotebook`",
}


@dataclass(frozen=True)
class ProgramUse:
    """A program a command starts: `name` (a bare word or an absolute path) and how."""

    name: str
    #: "command" (the first word of a simple command) or "shebang of <script>"
    via: str


@dataclass(frozen=True)
class ScriptUse:
    """A script the command runs by path (the first word contains a slash)."""

    word: str
    path: Path
    #: the directory the script must lie in (the hook's working directory)
    root: Path


def simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command in `command`, as the shell reads it (`shell_syntax`,
    the parser the pinned digest uses too); nothing when it cannot be parsed."""
    return [list(c.words) for c in shell_syntax.parse(command).commands if c.words]


def first_program(words: list[str]) -> str | None:
    """The program a simple command starts, or None (a builtin, a variable, nothing)."""
    i = 0
    while i < len(words):
        word = words[i]
        if _ASSIGNMENT.match(word) or word in _KEYWORDS:
            i += 1
            continue
        if word in _RUNNERS:
            i += 1
            # env's own options and assignments (env -i A=1 prog)
            while i < len(words) and (words[i].startswith("-") or _ASSIGNMENT.match(words[i])):
                i += 1
            continue
        if word in SHELL_BUILTINS or _UNRESOLVABLE.search(word) or not word:
            return None
        return word
    return None


def shebang_program(script: Path, root: Path) -> tuple[str | None, bool]:
    """(the interpreter a script's `#!` line names, whether that line ends in CR). The
    script must resolve inside `root` (the repository or the source's directory): a file
    elsewhere on this host is never opened because a repository names it."""
    try:
        fd = open_inside(script, root)
    except (OSError, RepoFileRefused):
        return None, False
    try:
        with os.fdopen(fd, "rb") as fh:
            head = fh.readline(512)
    except OSError:
        return None, False
    if not head.startswith(b"#!"):
        return None, False
    crlf = head.rstrip(b"\n").endswith(b"\r")
    words = head[2:].decode("utf-8", "replace").strip().split()
    if not words:
        return None, crlf
    if Path(words[0]).name == "env":
        rest = [w for w in words[1:] if not w.startswith("-") and not _ASSIGNMENT.match(w)]
        return (rest[0] if rest else None), crlf
    return words[0], crlf


def programs_of(command: str, base: Path | None) -> tuple[list[ProgramUse], list[ScriptUse]]:
    """What `command` starts: programs to look up in the image, and scripts run by path
    (resolved against `base`, the hook's working directory, when known)."""
    programs: list[ProgramUse] = []
    scripts: list[ScriptUse] = []
    for words in simple_commands(command):
        word = first_program(words)
        if word is None:
            continue
        if "/" not in word:
            programs.append(ProgramUse(word, "command"))
            continue
        if word.startswith("/"):
            programs.append(ProgramUse(word, "command"))
            continue
        if base is None:
            continue
        path = base / word
        scripts.append(ScriptUse(word, path, base))
        if resolves_inside(path, base) and path.is_file():
            interpreter, _ = shebang_program(path, base)
            if interpreter:
                programs.append(ProgramUse(interpreter, f"the shebang of {word}"))
    return programs, scripts


def script_problem(use: ScriptUse) -> tuple[str, str] | None:
    """(code, message) for a script run by path that cannot run as written, or None."""
    path = use.path
    if not resolves_inside(path, use.root):
        return None  # not this check's: never read a file outside the repository
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # a missing script is `script-not-found`
    if not stat.S_ISREG(mode):
        return None
    if not mode & 0o111:
        return (
            "script-not-executable",
            f"{use.word} is run by path but is not executable, so the hook fails with exit "
            f"126: chmod +x {use.word} and commit the mode (git update-index --chmod=+x "
            f"{use.word}), or run it through its interpreter",
        )
    interpreter, crlf = shebang_program(path, use.root)
    if crlf:
        return (
            "script-crlf",
            f"{use.word} has Windows (CRLF) line endings, so its `#!` line asks for "
            f"`{interpreter}\\r`, which does not exist: convert it to LF line endings",
        )
    return None


def program_known(name: str, programs: frozenset[str], path_dirs: Iterable[str]) -> bool | None:
    """Whether the image has `name` (a bare word on PATH, or an absolute path in a PATH
    directory); None when it cannot tell (an absolute path outside the PATH directories)."""
    if "/" not in name:
        return name in {p.rsplit("/", 1)[-1] for p in programs}
    directory = name.rsplit("/", 1)[0] or "/"
    if directory not in set(path_dirs):
        return None
    return name in programs


def _constant_subject(spec: EventSpec) -> str | None:
    """The constant an event's matcher is compared with (`Write`, `Stop`, ...), or None."""
    if spec.matcher_subject is None:
        return None
    try:
        value = spec.matcher_subject(spec.input_model.model_construct())
    except Exception:  # a field subject on an empty payload: not a constant
        return None
    return value or None


def _search(matcher: CompiledMatcher, value: str) -> bool:
    return matcher.pattern is not None and matcher.pattern.search(value) is not None


def matcher_problem(event: str, matcher: CompiledMatcher) -> str | None:
    """Why a matcher can never match the values its event sends, or None."""
    spec = EVENTS.get(event)
    if spec is None or not matcher.valid or matcher.matches_everything:
        return None
    shown = repr(matcher.source)
    constant = _constant_subject(spec)
    if constant is not None:
        if _search(matcher, constant):
            return None
        return (
            f"matcher {shown} never matches on {event}: {event} is matched against the "
            f"constant `{constant}`, so this hook never runs; remove the matcher or move the "
            "hook to the event it was meant for"
        )
    describes = spec.matcher_describes or ""
    if describes.startswith("the tool type"):
        if any(_search(matcher, name) for name in TOOL_NAMES):
            return None
        hint = next((why for name, why in _OTHER_AGENT_NAMES.items() if _search(matcher, name)), "")
        return (
            f"matcher {shown} matches none of the tool names {event} sends (Shell, Read, "
            f"Write, Grep, Delete, Task, MCP:<name>, ...), so this hook may never run"
            + (f": {hint}" if hint else "")
        )
    if describes == "subagent_type":
        if any(_search(matcher, name) for name in SUBAGENT_TYPES):
            return None
        tools = [name for name in TOOL_NAMES if _search(matcher, name)]
        if not tools:
            return None  # a custom subagent's name: cannot be judged here
        return (
            f"matcher {shown} never matches on {event}: it is compared with subagent_type "
            f"({', '.join(SUBAGENT_TYPES)}, or a custom subagent's name), and "
            f"{', '.join(f'`{t}`' for t in tools)} is a tool name ({PRE_TOOL_USE}), which this "
            f"event never sends; match the subagent type, or use {PRE_TOOL_USE} with `Task`"
        )
    return None


UNKNOWN_EVENT_NOTE = (
    "; some Cursor builds reject the whole hooks file when it names one unknown event, so "
    "none of its hooks would run there: remove or rename it"
)
