"""A hook's command line as its shell reads it: one parser for the digest and `validate`.

A command hook's `command` is run by `sh -c`, so what it can start is decided by shell
syntax, not by splitting at blanks. `parse` reads it with bashlex (a bash grammar) and
returns every simple command in it, wherever it sits: in lists (`;`, `&`, newlines),
pipelines, `&&`/`||`, subshells `( )`, groups `{ }`, functions, loops and conditionals, and
inside command substitutions; with each command's words (quotes removed, assignments
included) and the files its redirections name. A `sh -c '...'` (or bash, dash, zsh) string
is parsed as a command of its own.

What the text alone cannot tell is reported, never dropped (`uncertain`, and its reasons in
`unseen`): a line bashlex cannot parse (bad quoting, `case`, arithmetic), a command built at
run time (`$(...)`, backquotes, `<(...)`, `eval`, `xargs`, an alias, a here-document fed to
a program), a variable other than the workspace ones (whose value is the repository root)
or one of those with an operator (`${CURSOR_PROJECT_DIR:-.}`), `$PWD`, `~`, patterns the
shell may expand, a change of directory (`cd`, `pushd`, `env -C`, `git -C`, ...), a search
path set by the command (`PATH=...`, `PYTHONPATH=...`) and `python -m`. Each comes with its
reach: the repository files it may make the command run, as globs (`**` for any file), so
that the pinned digest can insist those files are covered. Parsing never raises.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any

import bashlex

from cloudrunner.shell import programs as shell_programs

#: variables whose value is the repository root in a project hook's environment
WORKSPACE_VARIABLES = frozenset({"CURSOR_PROJECT_DIR", "CLAUDE_PROJECT_DIR"})
#: a command line longer than this is not parsed (reported instead)
MAX_COMMAND_CHARS = 64 * 1024
#: `sh -c` strings nested deeper than this are reported, not parsed
MAX_NESTING = 4
_BUILT_AT_RUN_TIME = {
    "commandsubstitution": "a command substitution builds a command at run time",
    "processsubstitution": "a process substitution builds a command at run time",
}
_GLOB = frozenset("*?[")
#: a word the shell may expand as a pattern: `*`, `?`, or a bracket expression
_PATTERN = re.compile(r"[*?]|\[[^\]/]*\]")
#: any file of the repository
ANYWHERE = ("**",)
#: a workspace variable's name anywhere but right after `$` or `${`
_WORKSPACE_NAMED = re.compile(
    r"(?<![$\w])(?<!\$\{)(?:" + "|".join(sorted(WORKSPACE_VARIABLES)) + r")(?!\w)"
)
_EXPANSION = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$.|~[^/]*")


@dataclass(frozen=True)
class Uncertain:
    """A part of a command whose targets cannot be known from its text."""

    #: one line naming the part and why
    reason: str
    #: the repository files it may make the command run, as globs relative to the
    #: repository (`**`: any file)
    reach: tuple[str, ...] = ANYWHERE


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
    #: the same parts, each with the repository files it may make the command run
    uncertain: tuple[Uncertain, ...] = ()

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
    uncertain: dict[str, tuple[str, ...]] = field(default_factory=dict)
    depth: int = 0
    #: the text being parsed (word positions point into it)
    source: str = ""
    #: whether the workspace variables keep their value (the line never names them other
    #: than to expand them: no `NAME=`, `export NAME`, `read NAME`, `for NAME in`)
    workspace_fixed: bool = True
    #: the commands that change the directory (or the search path) words are read in,
    #: each with what it reaches besides the line's words (the directory it moves to)
    relocated: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def note(self, line: str, reach: tuple[str, ...] = ANYWHERE) -> None:
        if line not in self.unseen:
            self.unseen.append(line)
        known = self.uncertain.get(line, ())
        self.uncertain[line] = (*known, *(r for r in reach if r not in known))


@functools.lru_cache(maxsize=1024)
def parse(command: str) -> ParsedCommand:
    """Every simple command of `command`, and what cannot be seen in it (never raises).
    Remembered per command line: a pinned worker digests its hooks on every event."""
    walk = _Walk()
    walk.workspace_fixed = not _WORKSPACE_NAMED.search(command)
    if not walk.workspace_fixed:
        walk.note(
            f"`{_shown(command)}` names a workspace variable other than to expand it: the "
            "line may set it to another directory"
        )
    _parse_into(command, walk)
    if walk.relocated:
        _relocated_words(walk)
    uncertain = tuple(Uncertain(reason, reach) for reason, reach in walk.uncertain.items())
    return ParsedCommand(
        tuple(walk.commands), tuple(walk.other_words), tuple(walk.unseen), uncertain
    )


def _relocated_words(walk: _Walk) -> None:
    """After a `cd` (or a search path the command sets) a relative word may name a file in
    any directory: it reaches `**/WORD`."""
    words = [w for c in walk.commands for w in (*c.words, *c.redirects)] + walk.other_words
    reach: list[str] = []
    for word in words:
        for value in (word, *_option_values(word)):
            tail = _relative_tail(value)
            if tail is not None and f"**/{tail}" not in reach:
                reach.append(f"**/{tail}")
    for what, extra in walk.relocated:
        walk.note(what, (*extra, *reach) or ("**/*",))


def _option_values(word: str) -> list[str]:
    if "=" in word and (word.startswith("-") or _ASSIGNMENT.match(word)):
        value = word.split("=", 1)[1]
        return [value, *value.split(":")]
    return []


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _relative_tail(word: str) -> str | None:
    """A relative path-like word without its leading `./` and `../` parts (None for an
    option, an absolute path, a URL, an expansion or nothing)."""
    if not word or word.startswith(("-", "/")) or "://" in word or "$" in word or "\0" in word:
        return None
    parts = [p for p in os.path.normpath(word).split("/") if p not in ("", ".", "..")]
    return "/".join(parts) or None


def _pattern_reach(text: str) -> tuple[str, ...]:
    """What a relative pattern may name, in any directory (any file when absolute)."""
    tail = _relative_tail(text)
    return (f"**/{tail}",) if tail and not text.startswith("/") else ANYWHERE


def _expansion_reach(text: str) -> tuple[str, ...]:
    """What a word that starts with something known only at run time (a variable, `~`)
    may name: the literal path after the last expansion, in any directory."""
    tail = _EXPANSION.split(text)[-1]
    if not tail.startswith("/"):
        return ANYWHERE
    rest = _relative_tail(tail.lstrip("/"))
    return (f"**/{rest}",) if rest else ANYWHERE


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
    heredocs: list[str] = []
    for part in node.parts:
        kind = getattr(part, "kind", None)
        if kind in ("word", "assignment"):
            words.append(_word(part, walk))
        elif kind == "redirect":
            target = _redirect(part, walk)
            if target is not None:
                redirects.append(target)
            heredoc = getattr(part, "heredoc", None)
            if heredoc is not None:
                heredocs.append(str(getattr(heredoc, "value", "")))
        else:
            _node(part, walk)
    walk.commands.append(SimpleCommand(tuple(words), tuple(redirects)))
    _runs_a_string(words, walk)
    _changes_where_words_are_read(words, walk)
    for text in heredocs:
        _here_document(words, text, walk)


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
            name = str(getattr(part, "value", "") or "")
            if not name:  # $'...' or $"...": quoting bashlex does not read
                walk.note(f"`{_shown(text)}`: $'...' quoting is not read by the parser")
            elif name not in WORKSPACE_VARIABLES or not walk.workspace_fixed:
                shown = f"${name}" if name.isidentifier() else f"${{{name}}}"
                why = (
                    "is a parameter expansion with an operator, whose value is known only at "
                    "run time"
                    if not name.isidentifier() and name.isprintable()
                    else "is known only at run time"
                )
                walk.note(f"`{_shown(text)}`: {shown} {why}", _expansion_reach(text))
        elif kind == "tilde":
            walk.note(
                f"`{_shown(text)}`: ~ is the hook's HOME, known only at run time",
                _expansion_reach(text),
            )
        elif kind in _BUILT_AT_RUN_TIME:
            walk.note(f"`{_shown(text)}`: {_BUILT_AT_RUN_TIME[kind]}")
            _node(part.command, walk)
        else:
            _node(part, walk)
    raw = _raw(node, walk.source)
    if node.kind == "word" and _BRACES.search(raw if raw is not None else text):
        walk.note(
            f"`{_shown(text)}` may be a brace expansion that makes other words",
            _pattern_reach(_BRACES.sub("*", text)),
        )
    if node.kind == "word" and _PATTERN.search(text):
        walk.note(
            f"`{_shown(text)}` may be a pattern the shell expands to file names",
            _pattern_reach(text),
        )
    return text


_BRACES = re.compile(r"\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}")


def _raw(node: Any, source: str) -> str | None:
    pos = getattr(node, "pos", None)
    if not isinstance(pos, tuple) or len(pos) != 2:
        return None
    return source[pos[0] : pos[1]]


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
    """`eval ...` and the programs that run a string are reported; `sh -c STRING`, also
    after a wrapper (`env`, `nohup`, `timeout 5`, `find -exec`), has STRING parsed as a
    command."""
    plain = [w for w in words if "=" not in w.split("/", 1)[0]]
    if not plain:
        return
    shown = _shown(" ".join(plain))
    program = os.path.basename(plain[0])
    if program == "eval":
        walk.note(f"`{shown}`: eval runs a command built at run time")
        return
    if program in shell_programs.RUNS_ITS_STRING:
        walk.note(f"`{shown}`: {program} makes a command the text does not show")
    if program.startswith("python") and "-m" in plain[1:]:
        walk.note(f"`{shown}`: python -m runs a module found on its search path")
    _inline_code(program, plain, shown, walk)
    for start, word in enumerate(plain):
        if os.path.basename(word) in shell_programs.SHELLS:
            _shell_string(plain, start, walk)


def _inline_code(program: str, plain: list[str], shown: str, walk: _Walk) -> None:
    """An interpreter given code on its command line (`python -c`, `node -e`, an awk
    program that calls system(), a sed script with `e`): the code may run anything."""
    base = re.sub(r"[0-9.]+$", "", program)
    options = shell_programs.INLINE_CODE.get(base)
    if options is not None:
        for word in plain[1:]:
            if word in options or any(word.startswith(o + "=") for o in options if o[:2] == "--"):
                walk.note(f"`{shown}`: {program} {word} runs code given on its command line")
                return
            short = [o[1] for o in options if len(o) == 2 and o[0] == "-"]
            if word.startswith("-") and not word.startswith("--") and set(word[1:]) & set(short):
                walk.note(f"`{shown}`: {program} {word} runs code given on its command line")
                return
    if base in ("pwsh", "powershell") and not any(w.lower() in ("-file", "-f") for w in plain[1:]):
        walk.note(f"`{shown}`: {program} without -File runs a command given as text")
    programs = [w for w in plain[1:] if not w.startswith("-")]
    if (
        base in shell_programs.AWKS
        and "-f" not in plain[1:]
        and any(shell_programs.AWK_RUNS.search(w) for w in programs)
    ):
        walk.note(f"`{shown}`: its awk program runs a command")
    if base == "sed" and any(shell_programs.SED_RUNS.search(w) for w in plain[1:]):
        walk.note(f"`{shown}`: its sed script runs a command (`e`)")


def _shell_string(plain: list[str], start: int, walk: _Walk) -> None:
    """The string after a shell's `-c` (`sh -c STRING`, `bash -xc STRING`, `sh -c -- S`)."""
    i = start + 1
    while i < len(plain) and plain[i].startswith("-"):
        word = plain[i]
        i += 1
        if word.startswith("--") or "c" not in word[1:]:
            if word in ("-o", "+o", "-O", "+O"):
                i += 1  # the option's argument
            continue
        while i < len(plain) and plain[i] == "--":
            i += 1
        if i >= len(plain):
            return
        if walk.depth >= MAX_NESTING:
            walk.note(f"`{_shown(plain[i])}`: nested deeper than {MAX_NESTING} shells")
            return
        walk.depth += 1
        try:
            _parse_into(plain[i], walk)
        finally:
            walk.depth -= 1
        return


def _changes_where_words_are_read(words: list[str], walk: _Walk) -> None:
    """A `cd` (or `pushd`, `env -C DIR`, `git -C DIR`, `--chdir=DIR`, ...) anywhere in the
    line, or a search path it sets (`PATH=...`, `PYTHONPATH=...`, `export PATH=...`): the
    line's relative words may then name files in any directory, and a program run there
    may read any file of the directory it moved to."""
    shown = _shown(" ".join(words))
    for word in words:
        match = _ASSIGNMENT.match(word)
        if match and word[: match.end() - 1] in shell_programs.SEARCH_VARIABLES:
            name = word[: match.end() - 1]
            value = word[match.end() :]
            extra = tuple(_directory_reach(d) for d in value.split(":") if d)
            walk.relocated.append((f"`{shown}`: it sets ${name}, which decides what runs",
                                   extra))  # fmt: skip
            return
    plain = [w for w in words if not _ASSIGNMENT.match(w)]
    if not plain:
        return
    program = os.path.basename(plain[0])
    if program in shell_programs.CHANGES_DIRECTORY:
        targets = [w for w in plain[1:] if not w.startswith("-")][:1]
        # `cd` alone is HOME, `cd -` the last directory; `popd` goes back to a `pushd`'s
        extra = tuple(_directory_reach(t) for t in targets) or (
            () if program == "popd" else ANYWHERE
        )
        walk.relocated.append(
            (f"`{shown}`: {program} changes the directory the command's other words are "
             "read in", extra)
        )  # fmt: skip
        return
    for i, word in enumerate(plain[1:], start=1):
        option = word.split("=", 1)[0]
        if (program in shell_programs.DASH_C_DIRECTORY and word.startswith("-C")) or option in (
            shell_programs.DIRECTORY_OPTIONS
        ):
            if "=" in word:
                target = word.split("=", 1)[1]
            elif word not in ("-C", *shell_programs.DIRECTORY_OPTIONS):
                target = word[2:]
            else:
                target = plain[i + 1] if i + 1 < len(plain) else ""
            walk.relocated.append(
                (f"`{shown}`: {option} runs {program} in another directory",
                 (_directory_reach(target),))
            )  # fmt: skip
            return
    if program in shell_programs.RUNS_A_NAMED_FILE and _names_a_file(plain[1:]):
        return
    if program in shell_programs.READS_BY_CONVENTION:
        walk.note(
            f"`{shown}`: {program} runs what repository files it finds by convention say "
            "(a Makefile, package.json, test files, ...)"
        )


def _names_a_file(arguments: list[str]) -> bool:
    """Whether the first argument that is neither an option nor `run` is a script path."""
    for word in arguments:
        if word.startswith("-") or word == "run":
            continue
        return "/" in word or word.endswith(shell_programs.SCRIPT_SUFFIXES)
    return False


def _directory_reach(target: str) -> str:
    """What moving into `target` reaches: its whole tree when it is a plain relative
    directory (or one under the workspace variable), else any file of the repository."""
    for name in sorted(WORKSPACE_VARIABLES):
        for prefix in (f"${name}", f"${{{name}}}"):
            if target == prefix or target.startswith(prefix + "/"):
                target = "." + target[len(prefix) :]
    tail = _relative_tail(target)
    if tail is None or ".." in target.split("/") or _GLOB & set(target):
        return "**"
    return f"{tail}/**"


def _here_document(words: list[str], text: str, walk: _Walk) -> None:
    """A here-document fed to a shell is parsed as its script; fed to anything else, it is
    text that program may run."""
    plain = [w for w in words if not _ASSIGNMENT.match(w)]
    program = os.path.basename(plain[0]) if plain else ""
    body = text.rsplit("\n", 1)[0] if "\n" in text else ""
    if program in shell_programs.SHELLS and walk.depth < MAX_NESTING:
        walk.depth += 1
        try:
            _parse_into(body, walk)
        finally:
            walk.depth -= 1
        return
    if program in ("cat", "echo", "printf", "tee", "true", ":"):
        return
    walk.note(
        f"`{_shown(' '.join(words))} <<...`: a here-document is text {program or 'it'} may run"
    )
