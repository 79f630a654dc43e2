"""The command-line reference (docsgen/cli.py): its argument tables fit the page at 1280 px,
name a flag's choices where they can wrap, and show a default only as a reader gets it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from docsgen import cli

#: the widest flag a table's first column may show: about 250 px of code, which leaves the
#: meaning and default columns room in the page's content column at 1280 px
WIDEST_FLAG = 32


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument(
        "--decision",
        choices=("deny", "ask", "block", "followup", "allow", "none", "and-a-long-one"),
        help="the event's answer",
    )
    parser.add_argument("--source", dest="setting_source", choices=("team", "project"))
    parser.add_argument(
        "--jobs", type=int, default=7, metavar="N", help="processes (default: the CPUs)"
    )
    parser.add_argument("--columns", default=(0, 1, 2), help="columns (default: all: a,b,c)")
    parser.add_argument("--timeout", type=float, default=600.0, help="wait (default 600)")
    parser.add_argument("--base", default="base:1", help="build on (default: %(default)s)")
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("file", nargs="?", type=Path, default=Path("tool.toml"))
    return parser


def _rows(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """The argument table as {first cell: [meaning, default]}."""
    rows = {}
    for line in cli._arguments(parser).splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        rows[cells[0]] = cells[1:]
    return rows


def test_a_flag_with_choices_is_named_by_its_flag_and_lists_them_in_the_meaning() -> None:
    rows = _rows(_parser())
    assert rows["`--decision DECISION`"][0] == (
        "the event's answer (one of `deny`, `ask`, `block`, `followup`, `allow`, `none`, "
        "`and-a-long-one`)"
    )
    # named after the flag, not its destination; a flag with no help shows its choices
    assert rows["`--source SOURCE`"][0] == "one of `team`, `project`"
    assert not any("{" in first for first in rows)


def test_a_default_is_shown_as_a_reader_gets_it() -> None:
    rows = _rows(_parser())
    # the help says it in words and the value is this machine's: the help is the default
    assert rows["`--jobs N`"][1] == "see meaning"
    # a tuple the parser builds means nothing to a reader
    assert rows["`--columns COLUMNS`"][1] == "see meaning"
    # a whole float is written as typed, and then it agrees with the help
    assert rows["`--timeout TIMEOUT`"][1] == "`600`"
    # %(default)s is filled in before the help is compared
    assert rows["`--base BASE`"] == ["build on (default: base:1)", "`base:1`"]
    assert rows["`--limit LIMIT`"][1] == "`5`"
    assert rows["`file`"][1] == "`tool.toml`"


def test_no_argument_table_of_the_reference_is_wider_than_the_page() -> None:
    """Code in a table cell never wraps (the stylesheet keeps names whole), so a long code
    span in the first column is what made a table scroll sideways: each stays short, and
    no flag is shown with argparse's `{a,b,...}`."""
    page = cli.render()
    first_cells = re.findall(r"^\| (`[^`]+`) \|", page, re.M)
    assert len(first_cells) > 50
    too_wide = [c for c in first_cells if len(c) - 2 > WIDEST_FLAG]
    assert not too_wide, too_wide
    defaults = re.findall(r"^\|.*\| (`[^`]*`|[^|]*) \|$", page, re.M)
    assert not [d for d in defaults if "(" in d or "PosixPath" in d], defaults
    assert "`--decision DECISION`" in page
