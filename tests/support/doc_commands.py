"""The `cloudrunner` command lines the docs show, and a check of each against the real
argument parser: every subcommand exists and every flag is one that command accepts."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w-]*)")
SHELL_FENCES = ("sh", "bash", "shell", "console")
#: tokens that end one command (shlex's punctuation tokens)
SEPARATORS = frozenset({"|", "||", "&&", ";", "&", "(", ")", ">", ">>", "<", "<<", "|&", ";;"})
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
PROGRAM = re.compile(r"(?:^|/)cloudrunner$")


@dataclass(frozen=True)
class CommandLine:
    page: str
    line: int
    words: tuple[str, ...]
    #: named in a sentence (`cloudrunner audit` may name the group of commands)
    in_prose: bool = False

    def text(self) -> str:
        return f"{self.page}:{self.line}: cloudrunner {' '.join(self.words)}"


def _logical_lines(body: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Lines joined at a trailing backslash, and while a quote is open."""
    pending: list[str] = []
    start = 0
    for number, line in body:
        if not pending:
            start = number
        pending.append(line[:-1] if line.endswith("\\") else line)
        if line.endswith("\\"):
            continue
        text = " ".join(pending)
        try:
            shlex.split(text, comments=True)
        except ValueError:
            continue  # a quote runs on to the next line
        pending = []
        yield start, text
    if pending:
        yield start, " ".join(pending)


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:
        return []


def command_lines(page: Path, root: Path) -> Iterator[CommandLine]:
    name = str(page.relative_to(root))
    lines = page.read_text(encoding="utf-8").splitlines()
    body: list[tuple[int, str]] = []
    language: str | None = None
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if fence is not None:
            if language is None:
                language, body = fence.group(2) or "text", []
                continue
            if language in SHELL_FENCES or language == "text":
                prompt_only = language == "text"
                for start, text in _logical_lines(body):
                    stripped = text.strip()
                    if prompt_only:
                        if not stripped.startswith("$ "):
                            continue
                        stripped = stripped[2:]
                    yield from _calls(name, start, stripped)
            language = None
            continue
        if language is not None:
            body.append((number, line))
            continue
        for span in CODE_SPAN.finditer(line):  # `cloudrunner validate --strict` in prose
            if span.group(2).startswith("cloudrunner "):
                yield from _calls(name, number, span.group(2), in_prose=True)


#: words that run the command after them (`sudo cloudrunner ...`)
PREFIXES = frozenset({"sudo", "exec", "time", "nohup", "env", "then", "do", "else", "!"})
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _calls(name: str, number: int, text: str, *, in_prose: bool = False) -> Iterator[CommandLine]:
    tokens = _tokens(text)
    command_position = True
    for i, token in enumerate(tokens):
        at_start, command_position = (
            command_position,
            token in SEPARATORS
            or (command_position and (token in PREFIXES or bool(ASSIGNMENT.match(token)))),
        )
        if not at_start or not PROGRAM.search(token):
            continue
        words: list[str] = []
        for word in tokens[i + 1 :]:
            if word in SEPARATORS:
                break
            words.append(word)
        if words:
            yield CommandLine(name, number, tuple(words), in_prose)


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found = action.choices.get(name)
            return found if isinstance(found, argparse.ArgumentParser) else None
    return None


def problems(call: CommandLine, parser: argparse.ArgumentParser) -> list[str]:
    """What is wrong with a command line: an unknown command or a flag it does not take."""
    words = list(call.words)
    if words and words[0] in ("--version", "-h", "--help"):
        return []
    if call.in_prose and subparser(parser, words[0]) is None:
        return []  # a sentence about cloudrunner in code, not a command line
    while words and not words[0].startswith("-"):
        child = subparser(parser, words[0])
        if child is None:
            break
        parser, words = child, words[1:]
    if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
        if call.in_prose and len(words) == 0:
            return []  # `cloudrunner audit` names the group in a sentence
        return [f"{call.text()}: not a complete cloudrunner command"]
    known = set(parser._option_string_actions)
    out = []
    for word in words:
        if not word.startswith("-") or word == "-" or word == "--":
            continue
        flag = word.split("=", 1)[0]
        if flag not in known:
            out.append(f"{call.text()}: {flag} is not a flag of this command")
    return out
