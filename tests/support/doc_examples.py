"""The shell examples the README and the docs mark as runnable: `<!-- example: NAME -->` on
the line right before a ```sh block. A test runs them (tests/e2e/test_docs_examples.py),
from the repository's root, against the demo repository, through real containers; a unit
test checks that every marker is well-formed, known and collected.

A marker and its block may be indented alike, as a step of a numbered list is; the block
runs without that indentation. A name says how its blocks run:

- `tour`: README.md's five-minute tour; its blocks make their own checkout of the demo
  repository and run as one script, in order;
- `setup`: the block of docs/getting-started.md that puts `.venv/bin` on PATH and makes a
  checkout of the demo repository in `$work/demo`; it runs first in every `demo` script;
- `demo`: a docs page's blocks, run in order as one script after `setup` (so they may use
  `$work`, `$work/demo` and the state directory `$work/state`);
- `vm`: the agent-VM quick start's blocks, run on a VM rather than here: one by one, in
  order, as root in a clean bookworm container with the release's Debian package and
  SHA256SUMS in its working directory (tests/e2e/test_deb_install.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETUP_PAGE = "docs/getting-started.md"
#: marker name -> the one page that may use it (None: any docs page)
NAMES: dict[str, str | None] = {
    "tour": "README.md",
    "setup": SETUP_PAGE,
    "demo": None,
    "vm": "docs/quickstart/agent-vm.md",
}
#: marker name -> the test that runs its blocks somewhere else than on this machine
ELSEWHERE = {"vm": "tests/e2e/test_deb_install.py"}

#: a marker and the block it marks; both may be indented alike (a step of a numbered list)
MARKED = re.compile(
    r"^(?P<indent>[ ]*)<!-- example: (?P<name>[\w-]+) -->\n(?P=indent)```sh\n"
    r"(?P<body>.*?)^(?P=indent)```",
    re.S | re.M,
)
#: anything that looks like a marker, well-formed or not
MARKER = re.compile(r"<!--\s*example\b.*?-->", re.S)
#: any sh block
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository's root
    line: int  # of the marker
    name: str
    text: str


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def marked_blocks() -> list[Block]:
    """Every marked block, page by page, in order."""
    blocks = []
    for page in pages():
        text = page.read_text()
        for match in MARKED.finditer(text):
            indent = match["indent"]
            body = "".join(
                line.removeprefix(indent) for line in match["body"].splitlines(keepends=True)
            )
            line = _line(text, match.start() + len(indent))
            blocks.append(Block(str(page.relative_to(ROOT)), line, match["name"], body))
    return blocks


def markers() -> list[tuple[str, int, str]]:
    """Every marker-like comment: (page, line, the comment)."""
    found = []
    for page in pages():
        text = page.read_text()
        for match in MARKER.finditer(text):
            found.append((str(page.relative_to(ROOT)), _line(text, match.start()), match[0]))
    return found


def unmarked_blocks() -> list[Block]:
    """The sh blocks no marker marks (they cannot run here: a placeholder, a remote, ...)."""
    marked = {(block.page, block.text) for block in marked_blocks()}
    blocks = []
    for page in pages():
        text = page.read_text()
        name = str(page.relative_to(ROOT))
        for match in SH_BLOCK.finditer(text):
            if (name, match[1]) not in marked:
                blocks.append(Block(name, _line(text, match.start()), "", match[1]))
    return blocks


def blocks_named(name: str) -> list[Block]:
    """The blocks of one marker name, page by page, in order."""
    return [block for block in marked_blocks() if block.name == name]


def examples() -> dict[str, str]:
    """`page:name` -> the script its blocks make, in order (a `demo` script after `setup`)."""
    blocks = marked_blocks()
    setup = [block.text for block in blocks if block.name == "setup"]
    found: dict[str, list[str]] = {}
    for block in blocks:
        if block.name == "setup" or block.name in ELSEWHERE:
            continue
        first = setup if block.name == "demo" else []
        found.setdefault(f"{block.page}:{block.name}", list(first)).append(block.text)
    return {key: "\n".join(texts) for key, texts in found.items()}
