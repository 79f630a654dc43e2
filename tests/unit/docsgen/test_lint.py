"""The docs linter (docsgen/lint.py): the site and the README pass it, and each fault it is
there for is caught, with file, line and a code, on a page made to have it."""

from __future__ import annotations

from pathlib import Path

import pytest

from docsgen import lint

#: pages being rewritten on another branch: linted once it lands (then drop them here)
REWRITTEN_ELSEWHERE: set[str] = set()


def test_the_docs_and_the_readme_pass_the_linter() -> None:
    pages = [
        p for p in lint.default_paths() if lint._relative(p, lint.ROOT) not in REWRITTEN_ELSEWHERE
    ]
    findings = lint.lint(pages)
    assert not findings, "\n".join(f.text() for f in findings)


def _findings(tmp_path: Path, text: str, name: str = "docs/page.md") -> list[lint.Finding]:
    page = tmp_path / name
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text)
    return lint.lint([page], root=tmp_path)


def _codes(findings: list[lint.Finding]) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in findings]


def test_a_list_without_a_blank_line_before_it(tmp_path: Path) -> None:
    found = _findings(tmp_path, "# Page\n\nThe answers:\n- one\n- two\n")
    assert ("MD032", 4) in _codes(found)


def test_a_list_after_a_blank_line_passes(tmp_path: Path) -> None:
    assert _findings(tmp_path, "# Page\n\nThe answers:\n\n- one\n- two\n") == []


def test_an_escaped_pipe_inside_code_in_a_table(tmp_path: Path) -> None:
    text = "# Page\n\n| flag | meaning |\n|---|---|\n| `--repo URL\\|PATH` | where |\n"
    assert _codes(_findings(tmp_path, text)) == [("DOC001", 5)]


def test_a_bare_pipe_inside_code_and_an_escaped_one_outside_pass(tmp_path: Path) -> None:
    text = "# Page\n\n| flag | meaning |\n|---|---|\n| `--repo URL|PATH` | a \\| b |\n"
    assert _findings(tmp_path, text) == []


def test_the_readme_may_escape_a_pipe_in_code_for_github(tmp_path: Path) -> None:
    text = "# Page\n\n| flag | meaning |\n|---|---|\n| `--repo URL\\|PATH` | where |\n"
    assert _findings(tmp_path, text, name="README.md") == []


def test_a_backtick_in_a_diagram(tmp_path: Path) -> None:
    text = "# Page\n\n```text\nevent ─► gate ─► `gated` record\n```\n"
    assert _codes(_findings(tmp_path, text)) == [("DOC002", 4)]


def test_backticks_in_shell_output_are_not_a_diagram(tmp_path: Path) -> None:
    assert _findings(tmp_path, "# Page\n\n```text\nhook `guard.sh`: deny\n```\n") == []


def test_a_code_line_wider_than_the_page_in_a_guide(tmp_path: Path) -> None:
    wide = "echo " + "x" * lint.CODE_WIDTH
    text = f"# Page\n\n```sh\n{wide}\nshort\n```\n"
    assert _codes(_findings(tmp_path, text, name="docs/guides/g.md")) == [("DOC003", 4)]
    # the width counts from the fence's own indentation (a fence inside a tab or admonition)
    indented = f'# Page\n\n=== "A"\n\n    ```sh\n    {"y" * lint.CODE_WIDTH}\n    ```\n'
    assert _findings(tmp_path, indented, name="docs/guides/h.md") == []
    # reference pages may hold wide lines (generated usage, tables of output)
    assert _findings(tmp_path, text, name="docs/reference/r.md") == []


@pytest.mark.parametrize(
    "name",
    ["docs/concepts/audit.md", "docs/concepts/workspaces.md", "docs/concepts/gate.md",
     "docs/concepts/new-concept.md", "docs/troubleshooting.md", "docs/getting-started.md"],
)  # fmt: skip
def test_a_wide_code_line_in_a_concept_page_is_caught(tmp_path: Path, name: str) -> None:
    """The concepts are read early too: an error message or a status line printed on one
    long line is wrapped there, as it is in a guide."""
    wide = "cloudrunner: error: " + "a repository that does not exist " * 3
    text = f"# Page\n\n```text\n{wide.strip()}\n```\n"
    assert _codes(_findings(tmp_path, text, name=name)) == [("DOC003", 4)]
    wrapped = f"# Page\n\n```text\n{wide[:60]}\n    {wide[60:].strip()}\n```\n"
    assert _findings(tmp_path, wrapped, name=name) == []


def test_the_concept_pages_of_the_site_are_held_narrow() -> None:
    """Every page under docs/concepts/ is one DOC003 checks (a new concept page included)."""
    concepts = sorted((lint.ROOT / "docs" / "concepts").glob("*.md"))
    assert len(concepts) >= 7
    assert all(lint._narrow(page, lint.ROOT) for page in concepts)
    assert not lint._narrow(lint.ROOT / "docs" / "reference" / "cli.md", lint.ROOT)


def test_a_fence_left_open_still_counts_to_the_end(tmp_path: Path) -> None:
    wide = "z" * (lint.CODE_WIDTH + 1)
    found = _findings(tmp_path, f"# Page\n\n```sh\nok\n{wide}\n", name="docs/guides/g.md")
    assert ("DOC003", 5) in _codes(found)


@pytest.mark.parametrize(
    "line",
    [
        "Hooks get the environment of spec section 5.",
        "As the spec sections say.",
        "This was fixed (issue 17).",
        "See issue #12 for the history.",
        "The targets come from DESIGN.md.",
        "The protocol is in HOOKS.md.",
        "The hooks spec's decision: the safer reading wins.",
        "The checkout in /work/main is read.",
        "Read [the notes](../../../notes/plan.md).",
    ],
)
def test_references_readers_do_not_have(tmp_path: Path, line: str) -> None:
    found = _findings(tmp_path, f"# Page\n\n{line}\n")
    assert [f.code for f in found] == ["DOC004"], found


def test_links_inside_the_repository_and_to_the_web_pass(tmp_path: Path) -> None:
    (tmp_path / "docs" / "other.md").parent.mkdir(parents=True)
    (tmp_path / "docs" / "other.md").write_text("# Other\n")
    text = (
        "# Page\n\nSee [other](other.md#top), [the hooks docs](https://cursor.com/docs/agent/hooks)"
        " and [a section](#page).\n"
    )
    assert _findings(tmp_path, text) == []


def test_the_command_line_names_a_missing_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint.main([str(tmp_path / "nope.md")]) == 2
    assert "nope.md: no such file or folder" in capsys.readouterr().err


def test_the_command_line_prints_each_finding_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "p.md"
    page.write_text("# Page\n\nText:\n- a\n")
    assert lint.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "p.md:4:1: MD032" in out


def test_a_venv_without_the_linter_gets_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(*_: object) -> list[lint.Finding]:
        raise ModuleNotFoundError("No module named 'pymarkdown'", name="pymarkdown")

    monkeypatch.setattr(lint, "markdown_checks", missing)
    page = tmp_path / "p.md"
    page.write_text("# Page\n")
    assert lint.main([str(page)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "docs lint: pymarkdown is not installed; run `bash scripts/venv` to bring the .venv "
        "up to date"
    ]


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("The figures come from `bench/audit_bench.py`.", "a source path"),
        ("As cloudrunner/audit/records.py defines them.", "a source path"),
        ("Checked by `tests/e2e/test_worker_image.py`.", "a source path"),
        ("A test, test_sigterm_during_a_burst, checks it.", "a test's name"),
        ("Details are in `bench/README.md`.", "a file that is not on the site"),
        ("Measured on 2026-12-04 at the code of that day.", "a date"),
        ("| p50 | 7 ms | 3x bare: missed |", 'a goal "missed"'),
    ],
)
def test_notes_to_ourselves_on_a_user_page(tmp_path: Path, line: str, what: str) -> None:
    found = _findings(tmp_path, f"# Page\n\n{line}\n")
    assert [f.code for f in found] == ["DOC005"] and what in found[0].message


def test_notes_to_ourselves_pass_where_they_belong(tmp_path: Path) -> None:
    text = "# Dev\n\nOn 2026-12-04 `bench/audit_bench.py` missed its goal (test_x).\n"
    assert _findings(tmp_path, text, "docs/development.md") == []
    assert _findings(tmp_path, text, "docs/changelog.md") == []
    # a date inside code is an example of a format, not a note: `--since 2025-01-02`
    assert _findings(tmp_path, "# Page\n\nGive `--since 2025-01-02`.\n") == []
    assert _findings(tmp_path, "# Page\n\n```text\n2026-12-04T18:41:22Z ok\n```\n") == []


def test_a_sentence_cut_short_in_a_table(tmp_path: Path) -> None:
    text = (
        "# Page\n\n| exit | meaning |\n|---|---|\n"
        "| 0 | every answer matched |\n"
        "| 2 | the stream is unusable, or the settings are |\n"
        "| 3 | a `a|b` pipe in code and the |\n"
    )
    found = _findings(tmp_path, text)
    assert _codes(found) == [("DOC006", 6), ("DOC006", 7)]
    assert "'are'" in found[0].message


def test_a_header_cell_or_a_sentence_ending_in_a_preposition_passes(tmp_path: Path) -> None:
    text = (
        "# Page\n\n| status | answered on |\n|---|---|\n"
        "| 200 | which event the record belongs to |\n| 404 | `a` or `the` |\n"
        "| 100 | hook client, python -IS |\n| 101 | the one run with --smoke-is |\n"
    )
    assert _findings(tmp_path, text) == []


def _site(tmp_path: Path, css: str | None, extra: str = "") -> Path:
    (tmp_path / "docs" / "assets").mkdir(parents=True)
    config = "site_name: x\nsite_url: !ENV [SITE_URL, 'http://localhost/']\n" + extra
    if css is not None:
        (tmp_path / "docs" / "assets" / "extra.css").write_text(css)
        config += "extra_css:\n  - assets/extra.css\n"
    (tmp_path / "mkdocs.yml").write_text(config)
    return tmp_path


@pytest.mark.parametrize(
    "css",
    [
        None,
        "",
        ".md-typeset code { word-break: break-word; }",
        "table code { color: red; }",
        "table code { word-break: normal; overflow-wrap: normal; }",
        "table code { word-break: normal; }\npre code { white-space: nowrap; }",
    ],
    ids=[
        "no extra_css",
        "empty sheet",
        "code breaks anywhere",
        "rule without nowrap",
        "breaks at hyphens",
        "nowrap outside tables",
    ],
)
def test_a_site_whose_table_code_breaks_inside_names(tmp_path: Path, css: str | None) -> None:
    found = lint.check_stylesheet(_site(tmp_path, None if css is None else css + PROSE_RULE))
    tables = [f for f in found if "tables" in f.message]
    assert [f.code for f in tables] == ["DOC007"]
    assert len(found) == (2 if css is None else 1)  # no stylesheet: the prose rule too


TABLE_RULE = ".md-typeset table:not([class]) code {\n  white-space: nowrap;\n}\n"
PROSE_RULE = ".md-typeset :not(pre) > code {\n  display: inline-block;\n  max-width: 100%;\n}\n"


@pytest.mark.parametrize(
    "css",
    [
        "",
        ".md-typeset code { display: inline; }",
        "pre > code { display: inline-block; }",
        ".md-typeset :not(pre) > code { max-width: 100%; }",
    ],
    ids=["no prose rule", "inline", "only code blocks", "without inline-block"],
)
def test_a_site_whose_code_in_prose_breaks_at_a_hyphen(tmp_path: Path, css: str) -> None:
    """`--claude-code` at a line's end is cut after its `--` unless each span is a block."""
    found = lint.check_stylesheet(_site(tmp_path, TABLE_RULE + css))
    assert [f.code for f in found] == ["DOC007"]
    assert "prose" in found[0].message


def test_the_rules_that_keep_code_whole_pass(tmp_path: Path) -> None:
    assert lint.check_stylesheet(_site(tmp_path, TABLE_RULE + PROSE_RULE)) == []
    # the site's own stylesheet has them
    assert lint.check_stylesheet(lint.ROOT) == []


@pytest.mark.parametrize(
    ("title", "section"),
    [
        ("Workspaces", "The workspace"),
        ("HTTP API", "The API"),
        ("Hostile input", "Hostile input: matchers and payloads"),
        ("How answers are merged", "How answers are merged"),
    ],
)
def test_a_first_section_that_says_the_title_again(
    tmp_path: Path, title: str, section: str
) -> None:
    found = _findings(tmp_path, f"# {title}\n\nIntro.\n\n## {section}\n\nText.\n")
    assert _codes(found) == [("DOC008", 5)]


def test_a_first_section_that_names_its_own_part_passes(tmp_path: Path) -> None:
    text = "# Events\n\n## The 14 events cloud agents run\n\nText.\n\n## Events\n\nMore.\n"
    assert _findings(tmp_path, text) == []
    # a heading inside a code block is not a heading
    text = "# Workspaces\n\n```sh\n## Workspaces\n```\n\n## Clone or adopt\n\nText.\n"
    assert _findings(tmp_path, text) == []


def test_wide_terminal_output_in_a_quick_start_is_caught_even_with_a_marker(
    tmp_path: Path,
) -> None:
    """Output wider than the page is cut off for the reader: the page shows a form of the
    command that fits (the marker that let it through is gone)."""
    wide = "TIME  " + "COLUMN  " * 15
    text = f"# Page\n\n<!-- lint: wide terminal output -->\n```text\n{wide}\n```\n"
    found = _findings(tmp_path, text, name="docs/quickstart/q.md")
    assert ("DOC003", 5) in _codes(found)


def test_a_table_cell_of_sentences_ending_without_a_full_stop(tmp_path: Path) -> None:
    text = (
        "# Page\n\n| code | meaning |\n|---|---|\n"
        "| `a` | the program is not on `PATH`. Builtins are not checked |\n"
        "| `b` | it failed (exit 2). The agent reads it as a block |\n"
        "| `c` | one sentence. Then `code` |\n"
    )
    found = _findings(tmp_path, text)
    assert _codes(found) == [("DOC009", 5), ("DOC009", 6), ("DOC009", 7)]
    assert "full stop" in found[0].message


def test_a_table_cell_of_one_phrase_or_finished_sentences_passes(tmp_path: Path) -> None:
    text = (
        "# Page\n\n| code | meaning |\n|---|---|\n"
        "| `a` | the program is not on the image's `PATH` |\n"
        "| `b` | not on `PATH`. Builtins are not checked. |\n"
        "| `c` | version 1.2 or `e.g. X` in code, as in v2.0 |\n"
        "| `d` | one of: `a. B` |\n"
    )
    assert _findings(tmp_path, text) == []
