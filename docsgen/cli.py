"""docs/reference/cli.md: every command, its arguments and its help, from the argparse
parsers `cloudrunner` itself uses (one module per command in cloudrunner/commands/)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import PurePath

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
    """The flag and its value's name, as `--decision DECISION`: a flag with choices is
    named by its destination, not by argparse's `{deny,ask,...}` (the choices go in the
    meaning column, where they wrap; a table cell's code never does, so a long list of
    choices there made the whole table scroll sideways)."""
    if action.option_strings:
        names = ", ".join(action.option_strings)
        takes_value = action.nargs != 0
        if takes_value:
            flag = action.option_strings[-1].lstrip("-").replace("-", "_").upper()
            metavar = action.metavar or flag
            names += f" {metavar if isinstance(metavar, str) else ' '.join(metavar)}"
        return code(names)
    metavar = action.metavar or action.dest
    text = metavar if isinstance(metavar, str) else " ".join(metavar)
    return code(text + ("..." if action.nargs in ("*", "+") else ""))


#: a default's value shown as it is: other values (a tuple the parser builds, an object)
#: mean nothing to a reader
SHOWN_DEFAULTS = (str, int, float, PurePath)


def _help(action: argparse.Action) -> str:
    return (action.help or "").replace("%(default)s", str(action.default))


def _value(default: object) -> str:
    """A default as a reader would type it: 600, not 600.0."""
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)


def _default(action: argparse.Action) -> str:
    """The default column: the value, unless the help says the default in words and the
    value is not among them. Then the value is the machine's (`--jobs`: this machine's CPU
    count) or the code's form of it (`--columns`: column indexes), not what a reader gets,
    and the column sends the reader to the help."""
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, False, [], ""):
        return ""
    if action.required:
        return "required"
    help_text = _help(action)
    stated = "default" in help_text
    if not isinstance(action.default, SHOWN_DEFAULTS) or isinstance(action.default, bool):
        return "see meaning" if stated else ""
    value = _value(action.default)
    if stated and value not in help_text:
        return "see meaning"
    return code(value)


def _choices(action: argparse.Action) -> str:
    if not action.choices:
        return ""
    return ", ".join(code(c) for c in action.choices)


def _meaning(action: argparse.Action) -> str:
    """The help, then the choices a flag takes, if it has any."""
    help_text = _help(action)
    choices = _choices(action)
    if not choices:
        return help_text
    if not help_text:
        return f"one of {choices}"
    return f"{help_text} (one of {choices})"


def _arguments(parser: argparse.ArgumentParser) -> str:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        rows.append((_argument(action), _meaning(action), _default(action)))
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
