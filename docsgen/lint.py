"""`python -m docsgen.lint [PATH ...]`: lint the docs (docs/, README.md and CHANGELOG.md by
default).

Two passes, one report (`FILE:LINE:COL: CODE message`, exit 1 on any finding):

- pymarkdownlnt, a maintained CommonMark/GFM linter, set for MkDocs in pyproject.toml's
  `[tool.pymarkdown]`: among others a list without a blank line before it (MD032, which
  Python-Markdown renders as one paragraph with a literal "- "), a fence without a language;
- the checks below, for what a GFM linter cannot know about a Python-Markdown site or about
  this project's readers:
  - `DOC001` a `\\|` inside code in a table row (Python-Markdown keeps a `|` inside code in
    its cell and shows the backslash);
  - `DOC002` a backtick inside a diagram (a fence of box-drawing characters or arrows, shown
    as it is: the backticks show literally);
  - `DOC003` a code line wider than `CODE_WIDTH` in a page a newcomer reads first (the
    home page, installation, getting started, the quick starts, the guides, the concepts
    and troubleshooting): the page cuts it or scrolls it, so a command whose output is
    shown there is shown in a form that fits (fewer columns, one key a line, long lines
    wrapped);
  - `DOC004` a reference to what readers do not have: a spec section, an issue number, the
    design notes or the spec by file name, a path on a development machine, a link that
    leaves the repository;
  - `DOC005` a note to ourselves on a user page (every page but the development guide and
    the changelog): a source path of the repository, a test's name, a date in prose, a
    goal "missed";
  - `DOC006` a sentence cut short in a table: a body cell that ends in a word no sentence
    ends with ("are", "the", "or", ...);
  - `DOC009` a sentence ending without a full stop in a table cell: a cell that holds
    more than one sentence ("... skipped. Builtins are not checked") ends with a full stop,
    like its first (a cell of one phrase, the site's habit, needs none);
  - `DOC008` a page whose first section heading says its title again ("# Workspaces" then
    "## The workspace"): name what the section holds;
  - `DOC007` the site's stylesheet without the rules that keep code from breaking inside a
    name, at a hyphen too: in a table (`white-space: nowrap`) and in prose (each code span
    an inline block, so it wraps to the next line whole); checked once per run, on
    mkdocs.yml and its `extra_css`.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the widest code line a guide or a getting-started page may show (Material's content
#: column shows about 90 characters of code at a 1280-pixel window)
CODE_WIDTH = 90
#: pages held to CODE_WIDTH, as globs relative to the repository root
NARROW_PAGES = (
    "docs/index.md",
    "docs/installation.md",
    "docs/guides/*.md",
    "docs/getting-started*.md",
    "docs/quickstart/*.md",
    "docs/concepts/*.md",
    "docs/troubleshooting.md",
)

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)(?P<info>.*)$")
EXAMPLE_MARKER = re.compile(r"^\s*<!--\s*example\b.*-->\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
DIAGRAM_CHARS = re.compile("[\u2190-\u21ff\u2500-\u257f\u25b2-\u25c4]")
LINK_TARGET = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
ABSENT = (
    (re.compile(r"\bspec(?:ification)?\s+(?:section|§)\s*\d", re.I), "a spec section"),
    (re.compile(r"§\s*\d"), "a spec section"),
    (re.compile(r"\bspec\s+sections?\b|\bspec\s+Decision\b", re.I), "a spec section"),
    (re.compile(r"\(\s*issues?\s+#?\d+\s*\)|\bissues?\s+#\d+|\bissue\s+\d+\b", re.I),
     "an issue number"),
    (re.compile(r"\bDESIGN\.md\b"), "the design notes (DESIGN.md)"),
    (re.compile(r"\bHOOKS\.md\b|(?<![\w/.-])spec/|\b(?i:hooks\s+spec)\b"), "the spec file"),
    (re.compile(r"(?<![\w.])/work/|\bshared/spec\b"),
     "a path on a development machine"),
)  # fmt: skip


#: pages of the site written for the project's developers, not its users (DOC005 spares them)
DEVELOPER_PAGES = ("docs/development.md", "docs/changelog.md", "CHANGELOG.md")
#: what a user page must not carry, searched in the whole line (code included)
DEVELOPMENT_NAMES = (
    (re.compile(r"(?<![\w/.-])(?:CHANGELOG|bench/README)\.md\b"),
     "a file that is not on the site"),
    (re.compile(r"(?<![\w./-])(?:cloudrunner|client|tests|bench|docsgen|typecheck)/"
                r"[\w./-]*\.(?:py|go|md|toml|json|svg|txt)\b"), "a source path"),
    (re.compile(r"\btest_[a-z0-9_]+"), "a test's name"),
)  # fmt: skip
#: what a user page must not carry in its prose (code spans and blocks may show dates)
DEVELOPMENT_PROSE = (
    (re.compile(r"\b(?:19|20)\d\d-\d\d-\d\d\b"), "a date"),
    (re.compile(r"\bmissed\b", re.I), 'a goal "missed"'),
)
#: words no sentence ends with (articles, conjunctions, possessives, a bare "are"): a table
#: cell ending in one was cut short. Prepositions are not here: "belongs to" ends a sentence.
OPEN_ENDINGS = frozenset(
    ("a", "an", "the", "and", "or", "nor", "but", "than", "whether", "its", "their", "whose",
     "are", "is", "was", "were")
)  # fmt: skip
TABLE_RULE = re.compile(r"^\s*\|?[\s:|-]+\|[\s:|-]*$")
#: the stylesheet rule DOC007 looks for: table code that never wraps (`word-break: normal`
#: alone still breaks `payload-not-json` at its hyphens)
TABLE_CODE_RULE = re.compile(r"table[^{}]*\bcode\s*\{[^}]*white-space:\s*nowrap[^}]*\}", re.S)
#: and the one for code in prose: each span an inline block, so it moves to the next line
#: whole instead of breaking after the "--" of `--claude-code`
PROSE_CODE_RULE = re.compile(
    r":not\(pre\)\s*>\s*code\s*\{[^}]*display:\s*inline-block[^}]*\}", re.S
)
#: a sentence ends inside a cell: a full stop (or ! ?) after a word, then a capital
SENTENCE_INSIDE = re.compile(r"[a-z0-9)\]][.!?]\s+[A-Z]")


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    column: int
    code: str
    message: str

    def text(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.code} {self.message}"


def default_paths(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", root / "CHANGELOG.md", *sorted((root / "docs").rglob("*.md"))]


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def fences(lines: list[str]) -> Iterator[tuple[int, int, str, str]]:
    """Each fenced block: (first line index, closing line index or len(lines), its info
    string, its indentation). A fence left open runs to the end of the page."""
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        end = i + 1
        while end < len(lines):
            closing = FENCE.match(lines[end])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            end += 1
        yield i, end, opening["info"].strip(), indent
        i = end + 1


def _in_fences(lines: list[str]) -> set[int]:
    inside: set[int] = set()
    for start, end, _info, _indent in fences(lines):
        inside.update(range(start, min(end, len(lines) - 1) + 1))
    return inside


def check_tables(name: str, lines: list[str], inside: set[int]) -> Iterator[Finding]:
    for i, line in enumerate(lines):
        if i in inside or not line.lstrip().startswith("|"):
            continue
        for span in CODE_SPAN.finditer(line):
            if "\\|" in span.group(2):
                yield Finding(name, i + 1, span.start() + 1, "DOC001",
                              f"`\\|` inside code in a table shows its backslash: write "
                              f"a bare `|` inside the code span ({span.group(0)})")  # fmt: skip


def check_diagrams(name: str, lines: list[str]) -> Iterator[Finding]:
    for start, end, info, _indent in fences(lines):
        body = lines[start + 1 : end]
        if info.split(" ")[0] not in ("", "text") or not any(map(DIAGRAM_CHARS.search, body)):
            continue
        for offset, line in enumerate(body):
            column = line.find("`")
            if column >= 0:
                yield Finding(name, start + 2 + offset, column + 1, "DOC002",
                              "a backtick in a diagram shows literally: "
                              "drop it or quote with plain words")  # fmt: skip


def check_width(name: str, lines: list[str], width: int = CODE_WIDTH) -> Iterator[Finding]:
    for start, end, _info, indent in fences(lines):
        for offset, line in enumerate(lines[start + 1 : end]):
            shown = line[len(indent) :] if line.startswith(indent) else line.lstrip()
            if len(shown) > width:
                yield Finding(name, start + 2 + offset, width + 1, "DOC003",
                              f"code line of {len(shown)} characters, wider than the page "
                              f"({width}): break it (a shell line with `\\`)")  # fmt: skip


def check_absent(name: str, page: Path, lines: list[str], root: Path) -> Iterator[Finding]:
    for i, line in enumerate(lines):
        named: set[str] = set()
        for pattern, what in ABSENT:
            match = pattern.search(line)
            if match is not None and what not in named:
                named.add(what)
                yield Finding(name, i + 1, match.start() + 1, "DOC004",
                              f"names {what}, which readers do not have "
                              f"({match.group(0).strip()!r}): say it in the page's "
                              "own words or link a page of the site")  # fmt: skip
        for match in LINK_TARGET.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not path:
                continue
            resolved = (page.parent / path).resolve() if not path.startswith("/") else Path(path)
            if not resolved.is_relative_to(root.resolve()):
                yield Finding(name, i + 1, match.start(1) + 1, "DOC004",
                              f"links {target!r}, outside the repository: readers "
                              "do not have it")  # fmt: skip


def check_notes(name: str, lines: list[str], inside: set[int]) -> Iterator[Finding]:
    for i, line in enumerate(lines):
        prose = "" if i in inside else CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        prose = LINK_TARGET.sub(lambda m: " " * len(m.group(0)), prose)
        found = [(p.search(line), what) for p, what in DEVELOPMENT_NAMES]
        found += [(p.search(prose), what) for p, what in DEVELOPMENT_PROSE]
        for match, what in found:
            if match is not None:  # one finding a line: the first thing it names
                yield Finding(name, i + 1, match.start() + 1, "DOC005",
                              f"{what} on a user page ({match.group(0)!r}): a note for "
                              "the project's developers belongs in the development guide "
                              "or the changelog")  # fmt: skip
                break


def _cells(line: str) -> list[tuple[int, str]]:
    """(column, text) of each cell of a table row; a `|` inside code stays in its cell."""
    masked = CODE_SPAN.sub(lambda m: m.group(0).replace("|", "\0"), line)
    out, start = [], masked.index("|") + 1
    while (end := masked.find("|", start)) >= 0:
        out.append((start, line[start:end]))
        start = end + 1
    return out


def check_cells(name: str, lines: list[str], inside: set[int]) -> Iterator[Finding]:
    for i, line in enumerate(lines):
        if i in inside or not line.lstrip().startswith("|") or TABLE_RULE.match(line):
            continue
        if i + 1 < len(lines) and TABLE_RULE.match(lines[i + 1]):
            continue  # the header row: "answered on", "warns when" name a column
        for column, cell in _cells(line):
            text = CODE_SPAN.sub("code", cell).strip()
            words = re.findall(r"[A-Za-z']+", text)
            # the last word, not a flag's letters ("python -IS" ends in an option)
            last = re.search(r"(?<![-\w'])[A-Za-z']+$", text)
            open_ended = last is not None and last.group(0).lower() in OPEN_ENDINGS
            if len(words) >= 3 and open_ended:
                yield Finding(name, i + 1, column + 1, "DOC006",
                              f"a table cell ends in {words[-1]!r}: the sentence was cut "
                              "short, finish it")  # fmt: skip
            elif SENTENCE_INSIDE.search(text) and not re.search(r"[.!?:]$", text):
                yield Finding(name, i + 1, column + 1, "DOC009",
                              "a table cell of several sentences ends without a full "
                              "stop: end its last sentence as its first, or make the "
                              "cell one phrase")  # fmt: skip


HEADING = re.compile(r"^(#{1,2}) (.+?)\s*#*\s*$")


def _heading_words(text: str) -> list[str]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words
            if w not in ("the", "a", "an", "and", "of")]  # fmt: skip


def check_headings(name: str, lines: list[str], inside: set[int]) -> Iterator[Finding]:
    """DOC008: the first `##` heading repeats the page's `#` title."""
    title: list[str] | None = None
    for i, line in enumerate(lines):
        match = HEADING.match(line) if i not in inside else None
        if match is None:
            continue
        words = _heading_words(match.group(2))
        if len(match.group(1)) == 1:
            title = words
            continue
        if title and words and (set(words) <= set(title) or words[: len(title)] == title):
            yield Finding(name, i + 1, 1, "DOC008",
                          f"the first section heading {match.group(2)!r} says the page's "
                          "title again: name what the section holds, or drop it")  # fmt: skip
        return


def check_stylesheet(root: Path) -> list[Finding]:
    """DOC007: mkdocs.yml lists a stylesheet that keeps code in table cells whole."""
    import yaml  # type: ignore[import-untyped]

    config_path = root / "mkdocs.yml"
    if not config_path.exists():
        return []
    config = yaml.load(config_path.read_text(), Loader=_yaml_loader())
    if not isinstance(config, dict):
        config = {}
    sheets = config.get("extra_css") or []
    docs = root / str(config.get("docs_dir") or "docs")
    text = "\n".join(
        (docs / str(sheet)).read_text(encoding="utf-8")
        for sheet in sheets
        if (docs / str(sheet)).is_file()
    )
    found = []
    if not TABLE_CODE_RULE.search(text):
        found.append(
            Finding(
                "mkdocs.yml",
                1,
                1,
                "DOC007",
                "no stylesheet in extra_css keeps code in tables whole: Material "
                "breaks names such as setting keys mid-word, and a browser breaks "
                "them at hyphens; add a rule `table code { white-space: nowrap }`",
            )
        )
    if not PROSE_CODE_RULE.search(text):
        found.append(
            Finding(
                "mkdocs.yml",
                1,
                2,
                "DOC007",
                "no stylesheet in extra_css keeps code in prose whole: a browser "
                "breaks `--claude-code` after its `--` at a line's end; add a rule "
                "`:not(pre) > code { display: inline-block; max-width: 100% }`",
            )
        )
    return found


def _yaml_loader() -> Any:
    """A safe loader that reads mkdocs.yml's tags (such as !ENV) as nothing: the check needs
    none of their values."""
    import yaml

    loader: Any = type("TagBlindLoader", (yaml.SafeLoader,), {})
    loader.add_multi_constructor("", lambda _loader, _suffix, _node: None)
    return loader


def _narrow(page: Path, root: Path) -> bool:
    relative = Path(_relative(page, root))
    return any(relative.match(glob) for glob in NARROW_PAGES)


def own_checks(page: Path, root: Path = ROOT) -> list[Finding]:
    name = _relative(page, root)
    lines = page.read_text(encoding="utf-8").splitlines()
    inside = _in_fences(lines)
    found = [*check_diagrams(name, lines), *check_absent(name, page, lines, root)]
    if name.startswith("docs/"):  # README.md renders on GitHub, where `\|` is right
        found += check_tables(name, lines, inside)
        found += check_cells(name, lines, inside)
        found += check_headings(name, lines, inside)
        if name not in DEVELOPER_PAGES:
            found += check_notes(name, lines, inside)
    if _narrow(page, root):
        found += check_width(name, lines)
    return found


def markdown_checks(pages: Iterable[Path], root: Path = ROOT) -> list[Finding]:
    """pymarkdownlnt over the pages, with the settings in this repository's pyproject.toml
    (`root` only names the pages in the findings)."""
    from pymarkdown.api import PyMarkdownApi

    api = PyMarkdownApi().configuration_file_path(str(ROOT / "pyproject.toml"))
    found = []
    for page in pages:
        lines = page.read_text(encoding="utf-8").splitlines()
        for failure in api.scan_path(str(page)).scan_failures:
            before = lines[failure.line_number - 2] if failure.line_number >= 2 else ""
            if failure.rule_id.lower() == "md031" and (EXAMPLE_MARKER.match(before)):
                continue  # a marker of this linter or of the examples' test tops its fence
            message = failure.rule_description
            if failure.extra_error_information:
                message += f" [{failure.extra_error_information}]"
            found.append(Finding(_relative(page, root), failure.line_number,
                                 failure.column_number, failure.rule_id.upper(),
                                 f"{message} ({failure.rule_name})"))  # fmt: skip
    return found


def lint(pages: Iterable[Path], root: Path = ROOT) -> list[Finding]:
    pages = list(pages)
    found = markdown_checks(pages, root) + check_stylesheet(root)
    for page in pages:
        found += own_checks(page, root)
    return sorted(set(found))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m docsgen.lint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="Markdown files or folders (default: README.md and docs/)",
    )
    args = parser.parse_args(argv)
    pages: list[Path] = []
    for path in args.paths:
        if path.is_dir():
            pages += sorted(path.rglob("*.md"))
        elif path.is_file():
            pages.append(path)
        else:
            print(f"docs lint: {path}: no such file or folder", file=sys.stderr)
            return 2
    try:
        findings = lint(pages or default_paths())
    except ModuleNotFoundError as exc:  # a checkout whose .venv predates the linter
        print(
            f"docs lint: {exc.name} is not installed; run `bash scripts/venv` to bring the "
            ".venv up to date",
            file=sys.stderr,
        )
        return 2
    for finding in findings:
        print(finding.text())
    if findings:
        print(f"docs lint: {len(findings)} finding(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
