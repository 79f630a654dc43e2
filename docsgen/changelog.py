"""docs/changelog.md: the repository's CHANGELOG.md on the site, its links into docs/
made relative to the site."""

from __future__ import annotations

import re
from pathlib import Path

from docsgen.markdown import GENERATED_NOTE

ROOT = Path(__file__).resolve().parents[1]
#: a link from the repository's root into the docs folder: `](docs/page.md)`
DOCS_LINK = re.compile(r"\]\(docs/")


def render(changelog: Path = ROOT / "CHANGELOG.md") -> str:
    text = changelog.read_text(encoding="utf-8")
    title, _, rest = text.partition("\n")
    return f"{title}\n\n{GENERATED_NOTE}{DOCS_LINK.sub('](', rest)}"
