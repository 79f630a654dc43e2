"""The README's and the docs' runnable shell examples (tests/support/doc_examples.py): every
marker is well-formed, has a known name on a page allowed to use it, and marks a block that
the end-to-end test runs (tests/e2e/test_docs_examples.py)."""

from __future__ import annotations

from tests.support.doc_examples import NAMES, SETUP_PAGE, examples, marked_blocks, markers


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
        runs = [key for key, script in scripts.items() if block.text in script]
        assert runs, f"{block.page}:{block.line}: marked, but no example script runs it"


def test_the_setup_runs_first_in_every_docs_script() -> None:
    (setup,) = [block for block in marked_blocks() if block.name == "setup"]
    assert setup.page == SETUP_PAGE
    demos = {key: script for key, script in examples().items() if key.endswith(":demo")}
    assert demos, "no docs page has a runnable example"
    for key, script in demos.items():
        assert script.startswith(setup.text), key
