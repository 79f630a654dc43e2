"""A hook's command line as its shell reads it: one parser for the digest and `validate`.

A command hook's `command` is run by `sh -c`, so what it can start is decided by shell
syntax, not by splitting at blanks. `parse` reads it with bashlex (a bash grammar) and
returns every simple command in it, wherever it sits: in lists (`;`, `&`, newlines),
pipelines, `&&`/`||`, subshells `( )`, groups `{ }`, functions, loops and conditionals, and
inside command substitutions; with each command's words (quotes removed, assignments
included) and the files its redirections name. A `sh -c '...'` (or bash, dash, zsh) string
is parsed as a command of its own.

What the text alone cannot tell is reported in `unseen`, never dropped: a line bashlex
cannot parse (bad quoting, `case`, arithmetic), a command built at run time (`$(...)`,
backquotes, `<(...)`, `eval`), a variable other than the workspace ones (whose value is the
repository root), `~`, and patterns the shell may expand. Parsing never raises.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

import bashlex

#: variables whose value is the repository root in a project hook's environment
WORKSPACE_VARIABLES = frozenset({"CURSOR_PROJECT_DIR", "CLAUDE_PROJECT_DIR"})
#: a command line longer than this is not parsed (reported instead)
MAX_COMMAND_CHARS = 64 * 1024
#: `sh -c` strings nested deeper than this are reported, not parsed
MAX_NESTING = 4
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh"})
_BUILT_AT_RUN_TIME = {
    "commandsubstitution": "a command substitution builds a command at run time",
    "processsubstitution": "a process substitution builds a command at run time",
}
_GLOB = frozenset("*?[")


@dataclass(frozen=True)
class SimpleCommand:
    #: every word in order, assignments (`A=1`) included, quotes removed
    words: tuple[str, ...]
    #: the files its redirections name (`< in`, `> out`, `2>>log`)
    redirects: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParsedCommand:
    commands: tuple[SimpleCommand, ...]
    #: words outside any simple command that may name files (`for x in WORDS`)
    other_words: tuple[str, ...]
    #: what the text cannot tell: one line each, naming the part of the command
    unseen: tuple[str, ...]

    @property
    def words(self) -> tuple[str, ...]:
        """Every word and redirection target of the whole line."""
        out = [w for c in self.commands for w in (*c.words, *c.redirects)]
        return (*out, *self.other_words)


@dataclass
class _Walk:
    commands: list[SimpleCommand] = field(default_factory=list)
    other_words: list[str] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)
    depth: int = 0
    #: the text being parsed (word positions point into it)
    source: str = ""

    def note(self, line: str) -> None:
        if line not in self.unseen:
            self.unseen.append(line)


@functools.lru_cache(maxsize=1024)
def parse(command: str) -> ParsedCommand:
    """Every simple command of `command`, and what cannot be seen in it (never raises).
    Remembered per command line: a pinned worker digests its hooks on every event."""
    walk = _Walk()
    _parse_into(command, walk)
    return ParsedCommand(tuple(walk.commands), tuple(walk.other_words), tuple(walk.unseen))


def _shown(text: str, limit: int = 60) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


def _parse_into(command: str, walk: _Walk) -> None:
    if not command.strip():
        return
    if len(command) > MAX_COMMAND_CHARS:
        walk.note(f"`{_shown(command)}` is longer than {MAX_COMMAND_CHARS} characters: not parsed")
        return
    try:
        trees = bashlex.parse(command)
    except Exception as exc:  # bashlex raises its own errors, NotImplementedError and worse
        reason = " ".join(str(exc).split()) or type(exc).__name__
        walk.note(f"`{_shown(command)}` cannot be parsed ({_shown(reason, 80)})")
        return
    outer, walk.source = walk.source, command
    try:
        for tree in trees:
            try:
                _node(tree, walk)
            except Exception as exc:  # a tree of a shape this walk does not know: reported
                walk.note(
                    f"`{_shown(command)}` has a part that cannot be read ({type(exc).__name__})"
                )
    finally:
        walk.source = outer


def _node(node: Any, walk: _Walk) -> None:
    kind = getattr(node, "kind", None)
    if kind == "command":
        _command(node, walk)
    elif kind in ("word", "assignment"):
        walk.other_words.append(_word(node, walk))
    elif kind == "redirect":
        target = _redirect(node, walk)
        if target is not None:
            walk.other_words.append(target)
    elif kind in _BUILT_AT_RUN_TIME:
        walk.note(f"`{_shown(_text_of(node))}`: {_BUILT_AT_RUN_TIME[kind]}")
        _node(node.command, walk)
    elif kind in ("operator", "pipe", "reservedword", "heredoc", "tilde", "parameter"):
        return
    else:
        children = [
            *(getattr(node, "parts", None) or ()),
            *(getattr(node, "list", None) or ()),
        ]
        for child in children:
            _node(child, walk)


def _text_of(node: Any) -> str:
    return str(getattr(node, "word", "") or getattr(node, "value", "") or getattr(node, "kind", ""))


def _command(node: Any, walk: _Walk) -> None:
    words: list[str] = []
    redirects: list[str] = []
    for part in node.parts:
        kind = getattr(part, "kind", None)
        if kind in ("word", "assignment"):
            words.append(_word(part, walk))
        elif kind == "redirect":
            target = _redirect(part, walk)
            if target is not None:
                redirects.append(target)
        else:
            _node(part, walk)
    walk.commands.append(SimpleCommand(tuple(words), tuple(redirects)))
    _runs_a_string(words, walk)


def _redirect(node: Any, walk: _Walk) -> str | None:
    output = getattr(node, "output", None)
    if getattr(output, "kind", None) != "word":
        return None  # a descriptor (2>&1), or a here-document's delimiter
    if str(getattr(node, "type", "")).startswith("<<"):
        return None
    return _word(output, walk)


def _word(node: Any, walk: _Walk) -> str:
    text = _unquoted(node, walk.source) or str(node.word)
    for part in getattr(node, "parts", None) or ():
        kind = getattr(part, "kind", None)
        if kind == "parameter":
            name = str(part.value)
            if name not in WORKSPACE_VARIABLES:
                walk.note(f"`{_shown(text)}`: ${name} is known only at run time")
        elif kind == "tilde":
            walk.note(f"`{_shown(text)}`: ~ is the hook's HOME, outside the repository")
        elif kind in _BUILT_AT_RUN_TIME:
            walk.note(f"`{_shown(text)}`: {_BUILT_AT_RUN_TIME[kind]}")
            _node(part.command, walk)
        else:
            _node(part, walk)
    if _GLOB & set(text) and node.kind == "word":
        walk.note(f"`{_shown(text)}` may be a pattern the shell expands to file names")
    return text


def _unquoted(node: Any, source: str) -> str | None:
    """The word's text with its quotes removed as sh removes them, from the source text
    (bashlex leaves quotes in a word that mixes styles: 'a'"'"'b'); None when the word
    holds an expansion (bashlex's own text is used then) or its position is unknown."""
    pos = getattr(node, "pos", None)
    if not isinstance(pos, tuple) or len(pos) != 2:
        return None
    raw = source[pos[0] : pos[1]]
    if not raw or "$" in raw or "`" in raw:
        return None
    out: list[str] = []
    i, quote = 0, ""
    while i < len(raw):
        c = raw[i]
        if quote == "'":
            if c == "'":
                quote = ""
            else:
                out.append(c)
        elif c == "\\" and i + 1 < len(raw) and (quote != '"' or raw[i + 1] in '"\\\n'):
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 1
        elif c in "'\"" and quote in ("", c):
            quote = "" if quote else c
        else:
            out.append(c)
        i += 1
    return None if quote else "".join(out)


def _runs_a_string(words: list[str], walk: _Walk) -> None:
    """`eval ...` is reported; `sh -c STRING` has STRING parsed as a command."""
    plain = [w for w in words if "=" not in w.split("/", 1)[0]]
    if not plain:
        return
    program = os.path.basename(plain[0])
    if program == "eval":
        walk.note(f"`{_shown(' '.join(plain))}`: eval runs a command built at run time")
        return
    if program not in _SHELLS:
        return
    for i, word in enumerate(plain[1:-1], start=1):
        if word.startswith("-") and not word.startswith("--") and "c" in word[1:]:
            if walk.depth >= MAX_NESTING:
                walk.note(f"`{_shown(plain[i + 1])}`: nested deeper than {MAX_NESTING} shells")
                return
            walk.depth += 1
            try:
                _parse_into(plain[i + 1], walk)
            finally:
                walk.depth -= 1
            return
