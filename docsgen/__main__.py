"""`python -m docsgen [--check]`: write (or check) the generated reference pages, and the
generated parts of hand-written pages (between `<!-- docsgen: NAME -->` and
`<!-- /docsgen: NAME -->`)."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def pages() -> dict[str, Callable[[], str]]:
    # argparse wraps usage lines to the terminal width: pin it so the pages are stable
    os.environ["COLUMNS"] = "100"
    from docsgen import changelog, claude_code, cli, daemon_api, events, settings

    return {
        "reference/cli.md": cli.render,
        "reference/settings.md": settings.render,
        "reference/events.md": events.render,
        "concepts/claude-code.md": claude_code.render,
        "reference/routes.md": daemon_api.routes,
        "reference/metrics.md": daemon_api.metrics,
        "changelog.md": changelog.render,
    }


def fragments(docs: Path) -> dict[str, Callable[[], str]]:
    from docsgen import audit_kinds, diagnostic_codes, error_codes, performance

    return {
        "audit-kinds": audit_kinds.render,
        "diagnostic-codes": diagnostic_codes.render,
        "error-codes": error_codes.render,
        **performance.fragments(docs),  # from the bench run committed beside the page
    }


FRAGMENT = re.compile(r"(<!-- docsgen: ([\w-]+) -->\n)(.*?)(<!-- /docsgen: \2 -->)", re.S)


def fill(text: str, rendered: dict[str, str]) -> str:
    """The page with each marked part replaced by what the code gives for it."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in rendered:
            raise SystemExit(f"docsgen: unknown generated part {name!r} (known: "
                             f"{', '.join(rendered)})")  # fmt: skip
        return f"{match.group(1)}\n{rendered[name]}\n{match.group(4)}"

    return FRAGMENT.sub(replace, text)


def generated(docs: Path) -> dict[str, str]:
    """Every page with generated content: name under docs -> its text as it should be."""
    out = {name: render() for name, render in pages().items()}
    rendered = {name: render() for name, render in fragments(docs).items()}
    for path in sorted(docs.rglob("*.md")):
        name = str(path.relative_to(docs))
        if name in out:
            continue
        text = path.read_text()
        if "<!-- docsgen: " in text:
            out[name] = fill(text, rendered)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m docsgen", description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a page is out of date"
    )
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder")
    args = parser.parse_args(argv)
    from docsgen.performance import Refused

    try:
        pages_now = generated(args.docs)
    except Refused as exc:
        print(f"docsgen: error: {exc}", file=sys.stderr)
        return 1
    stale = []
    for name, text in pages_now.items():
        path = args.docs / name
        current = path.read_text() if path.exists() else ""
        if current == text:
            continue
        if args.check:
            stale.append(name)
            sys.stderr.writelines(
                difflib.unified_diff(
                    current.splitlines(keepends=True), text.splitlines(keepends=True),
                    f"committed/{name}", f"generated/{name}", n=1,
                )
            )  # fmt: skip
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"docsgen: wrote {path}")
    if stale:
        print(
            f"docsgen: {len(stale)} page(s) out of date: {', '.join(stale)}; "
            "run `python -m docsgen` and commit the result",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
