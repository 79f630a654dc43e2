"""The README's and the docs' runnable shell examples (tests/support/doc_examples.py): every
marker is well-formed, has a known name on a page allowed to use it, and marks a block that
the end-to-end test runs (tests/e2e/test_docs_examples.py)."""

from __future__ import annotations

import re
import shlex

import pytest

from cloudrunner.cli import build_parser
from tests.support.doc_examples import (
    ELSEWHERE,
    NAMES,
    SETUP_PAGE,
    examples,
    marked_blocks,
    markers,
    unmarked_blocks,
)


def test_every_marker_marks_a_sh_block_with_a_known_name() -> None:
    marked = {(block.page, block.line) for block in marked_blocks()}
    stray = [f"{page}:{line}: {comment}" for page, line, comment in markers()
             if (page, line) not in marked]  # fmt: skip
    assert not stray, (
        "markers that mark no block the test runs (the form is `<!-- example: NAME -->` on "
        f"the line right before a ```sh block): {stray}"
    )
    for block in marked_blocks():
        assert block.name in NAMES, f"{block.page}:{block.line}: unknown example {block.name!r}"
        page = NAMES[block.name]
        assert page in (None, block.page), f"{block.page}:{block.line}: {block.name} is {page}'s"
        if page is None:
            assert block.page.startswith("docs/"), f"{block.page}:{block.line}: not a docs page"


def test_every_marked_block_is_run() -> None:
    scripts = examples()
    for block in marked_blocks():
        if block.name in ELSEWHERE:  # that test runs every block of its name
            continue
        runs = [key for key, script in scripts.items() if block.text in script]
        assert runs, f"{block.page}:{block.line}: marked, but no example script runs it"


def test_the_setup_runs_first_in_every_docs_script() -> None:
    (setup,) = [block for block in marked_blocks() if block.name == "setup"]
    assert setup.page == SETUP_PAGE
    demos = {key: script for key, script in examples().items() if key.endswith(":demo")}
    assert demos, "no docs page has a runnable example"
    for key, script in demos.items():
        assert script.startswith(setup.text), key


def _commands(script: str) -> list[str]:
    """The `cloudrunner ...` commands of a shell block: continuations joined, comments
    dropped, pipelines and lists split."""
    joined = script.replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        for part in re.split(r"\||&&|;", line.split(" #", 1)[0]):
            if part.strip().startswith("cloudrunner "):
                found.append(part.strip())
    return found


def test_the_cloudrunner_commands_of_unmarked_blocks_parse() -> None:
    """What cannot run here (a remote, Kubernetes, a placeholder ID) is still a command
    that exists, with flags that exist; a synopsis (`[--flag]`) is left alone."""
    checked = 0
    for block in unmarked_blocks():
        for command in _commands(block.text):
            if "[" in command or "..." in command:
                continue
            words = shlex.split(command)[1:]
            try:
                build_parser(words[0]).parse_args(words)
            except SystemExit:
                pytest.fail(f"{block.page}:{block.line}: `{command}` does not parse")
            checked += 1
    assert checked
