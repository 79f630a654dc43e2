"""`python -m docsgen [--check]`: write (or check) the generated reference pages."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def pages() -> dict[str, Callable[[], str]]:
    # argparse wraps usage lines to the terminal width: pin it so the pages are stable
    os.environ["COLUMNS"] = "100"
    from docsgen import claude_code, cli, daemon_api, events, settings

    return {
        "reference/cli.md": cli.render,
        "reference/settings.md": settings.render,
        "reference/events.md": events.render,
        "concepts/claude-code.md": claude_code.render,
        "reference/routes.md": daemon_api.routes,
        "reference/metrics.md": daemon_api.metrics,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m docsgen", description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a page is out of date"
    )
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder")
    args = parser.parse_args(argv)
    stale = []
    for name, render in pages().items():
        path = args.docs / name
        text = render()
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
