"""`python -m deploygen [--check]`: write (or check) the deploy artefacts generated from code,
today the Grafana dashboard deploy/grafana/cloudrunner.json."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from deploygen import grafana

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "cloudrunner.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploygen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    text = grafana.render()
    current = DASHBOARD.read_text(encoding="utf-8") if DASHBOARD.exists() else None
    if args.check:
        if current != text:
            print(f"deploygen: {DASHBOARD.relative_to(ROOT)} is out of date; run "
                  "`python -m deploygen`", file=sys.stderr)  # fmt: skip
            return 1
        return 0
    if current != text:
        DASHBOARD.write_text(text, encoding="utf-8")
        print(f"deploygen: wrote {DASHBOARD.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
