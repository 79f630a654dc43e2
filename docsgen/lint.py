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
    guides, getting started and the quick starts): the page cuts it or scrolls it (a
    `text` fence of terminal output after `<!-- lint: wide terminal output -->` may be as
    wide as the program prints it);
  - `DOC004` a reference to what readers do not have: a spec section, an issue number, the
    design notes or the spec by file name, a path on a development machine, a link that
    leaves the repository.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the widest code line a guide or a getting-started page may show (Material's content
#: column shows about 90 characters of code at a 1280-pixel window)
CODE_WIDTH = 90
#: pages held to CODE_WIDTH, as globs relative to the repository root
NARROW_PAGES = ("docs/guides/*.md", "docs/getting-started*.md", "docs/quickstart/*.md")

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)(?P<info>.*)$")
#: before a `text` fence: terminal output shown as wide as the program prints it (a table)
WIDE_OUTPUT = re.compile(r"^\s*<!--\s*lint: wide terminal output\s*-->\s*$")
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
    (re.compile(r"\bHOOKS\.md\b|(?<![\w/.-])spec/"), "the spec file"),
    (re.compile(r"(?<![\w.])/work/|\bshared/spec\b"),
     "a path on a development machine"),
)  # fmt: skip


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
    for start, end, info, indent in fences(lines):
        if start and WIDE_OUTPUT.match(lines[start - 1]) and info.split(" ")[0] == "text":
            continue  # terminal output as wide as the program prints it, said so on the page
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
            if failure.rule_id.lower() == "md031" and (
                EXAMPLE_MARKER.match(before) or WIDE_OUTPUT.match(before)
            ):
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
    found = markdown_checks(pages, root)
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
