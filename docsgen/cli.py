"""docs/reference/cli.md: every command, its arguments and its help, from the argparse
parsers `cloudrunner` itself uses (one module per command in cloudrunner/commands/)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from cloudrunner.cli import build_parser
from docsgen.markdown import GENERATED_NOTE, code, table


def _subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            yield (*path, name), helps.get(name, ""), sub
            yield from _subcommands(sub, (*path, name))


def _has_subcommands(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def _argument(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        takes_value = action.nargs != 0
        if takes_value:
            choices = "{" + ",".join(map(str, action.choices)) + "}" if action.choices else None
            metavar = action.metavar or choices or action.dest.upper()
            names += f" {metavar if isinstance(metavar, str) else ' '.join(metavar)}"
        return code(names)
    metavar = action.metavar or action.dest
    text = metavar if isinstance(metavar, str) else " ".join(metavar)
    return code(text + ("..." if action.nargs in ("*", "+") else ""))


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, False, [], ""):
        return ""
    if action.required:
        return "required"
    return code(action.default)


def _choices(action: argparse.Action) -> str:
    if not action.choices:
        return ""
    return ", ".join(code(c) for c in action.choices)


def _arguments(parser: argparse.ArgumentParser) -> str:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        help_text = (action.help or "").replace("%(default)s", str(action.default))
        if _choices(action):
            help_text = f"{help_text} (one of {_choices(action)})".strip()
        rows.append((_argument(action), help_text, _default(action)))
    if not rows:
        return "No arguments.\n"
    return table(("argument", "meaning", "default"), rows)


def render() -> str:
    parser = build_parser()
    out = [
        "# Command line",
        "",
        GENERATED_NOTE,
        f"{parser.description}",
        "",
        "Every command exits 0 on success, 1 when it ran and found problems (`validate` with",
        "errors, `audit verify` on a broken log), and 2 with one line on stderr naming what is",
        "wrong when the invocation, a setting, an input file, a payload or the environment is",
        "unusable. A bug exits 70.",
        "",
        _arguments(parser),
    ]
    for path, help_text, sub in _subcommands(parser, ()):
        heading = "#" * min(len(path) + 1, 4)
        out += [f"{heading} `cloudrunner {' '.join(path)}`", ""]
        if help_text:
            out += [help_text[0].upper() + help_text[1:] + ".", ""]
        if sub.description and sub.description != help_text:
            out += [sub.description, ""]
        if _has_subcommands(sub):
            continue
        out += ["```text", sub.format_usage().strip(), "```", "", _arguments(sub)]
    return "\n".join(out).rstrip() + "\n"
