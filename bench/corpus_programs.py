"""Which programs the corpus's hooks start that a runtime image lacks.

    .venv/bin/python bench/corpus_programs.py IMAGE [IMAGE ...]
    .venv/bin/python bench/corpus_programs.py cloudrunner/hook-runtime:latest --dir DIR

Runs `cloudrunner validate` (the same check a hook author gets) over every hooks file of the
corpus (shared/corpus/hooks-json beside the checkout: third-party data, not kept in the
repository), once per image, and prints per image how many
cloud-running hooks start a program the image does not have, and which programs. Needs a
Docker engine (the image's programs are listed in a throwaway container); prints figures,
asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "hooks-json"


def measure(
    image: str, files: list[Path]
) -> tuple[int, collections.Counter[str], dict[str, set[str]]]:
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "validate", "--format", "json", "--image", image,
         *map(str, files)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode not in (0, 1):
        raise SystemExit(f"validate failed (exit {proc.returncode}): {proc.stderr.strip()}")
    report = json.loads(proc.stdout)
    notes = [n["message"] for n in report.get("notes", [])]
    if not any(n["code"] == "image-checked" for n in report.get("notes", [])):
        raise SystemExit(f"the image check did not run: {'; '.join(notes)}")
    running = 0
    missing: collections.Counter[str] = collections.Counter()
    where: dict[str, set[str]] = collections.defaultdict(set)
    for f in report["files"]:
        running += sum(1 for h in f["hooks"] if h["verdict"] == "runs")
        for d in f["diagnostics"]:
            if d["code"] == "program-not-in-image":
                found = re.match(r"`([^`]+)`", d["message"])
                name = found.group(1) if found else "?"
                missing[name] += 1
                where[name].add(f["path"])
    return running, missing, where


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("images", nargs="+", metavar="IMAGE")
    parser.add_argument("--dir", type=Path, default=CORPUS, help="a directory of hooks files")
    args = parser.parse_args(argv)
    files = sorted(args.dir.glob("*.json"))
    if not files:
        raise SystemExit(f"no hooks files in {args.dir}")
    for image in args.images:
        running, missing, where = measure(image, files)
        total_files = len(set().union(*where.values())) if where else 0
        print(
            f"{image}: {len(files)} files, {running} hooks run in cloud agents; "
            f"{sum(missing.values())} start a program the image lacks ({total_files} files)"
        )
        for name, count in missing.most_common():
            print(f"  {name:<28} {count:>3} hook(s) in {len(where[name])} file(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
