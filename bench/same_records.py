"""Do two builds write the same audit records for the same events? For changes that must not
change behaviour (a layout change, a refactor of the event path).

    python -m bench.same_records record OUT.jsonl    # the demo's events, this checkout
    python -m bench.same_records compare A.jsonl B.jsonl

`record` runs the demo's events (`examples/run_demo.py`: the closed gate, an enterprise
prompt guard, the project's shell guard and formatter, three stops over the loop limit, a
non-cloud event) through a `cloudrunner serve` daemon and its per-event client, as the demo
does, and copies the audit log. Run it from each build's checkout (its own `.venv`), so the
demo driver and the package are that build's. `compare` reads both logs, drops what differs
from run to run whatever the build (times, pids, the hash chain, durations, container ids,
the run's temporary directory and channel names, the test commit's id) and says which
records differ and where; exit 0 when none does. Record both builds from the same
checkout path (check each build out in turn in one worktree): a hook's output that names
a path has a byte count that follows the path's length.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: fields whose values differ between two runs of one build
RUN_SPECIFIC = frozenset({
    "hash", "prev_hash", "time", "pid", "commit", "duration_ms", "container_id",
    "sandbox_id", "channel_peer", "image_id", "image_digest",
})  # fmt: skip
#: run-specific parts of strings: the demo's temporary directory, a session's channel
#: directory, a hook home's digest of that directory
RUN_SPECIFIC_TEXT = (
    (re.compile(r"/[^\s\"']*/\.demo/run-[A-Za-z0-9_]+"), "RUN"),
    (re.compile(r"sandbox-channels/session-[^/\"\s]+"), "sandbox-channels/SESSION"),
    (re.compile(r"homes/[0-9a-f]{8,}"), "homes/HOME"),
)


def normalised(value: Any) -> Any:
    """`value` (a record or a part of one) without its run-specific fields and text."""
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items() if k not in RUN_SPECIFIC}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    if isinstance(value, str):
        for pattern, stand_in in RUN_SPECIFIC_TEXT:
            value = pattern.sub(stand_in, value)
    return value


def differences(a: Any, b: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Each leaf where `a` and `b` differ: its path and both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from differences(a.get(key), b.get(key), f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for n, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from differences(x, y, f"{path}[{n}]")
    elif a != b:
        yield path or ".", a, b


def read_records(path: Path) -> list[Any]:
    return [normalised(json.loads(line)) for line in path.read_text().splitlines() if line]


def compare(a: Path, b: Path) -> list[str]:
    """One line per difference between the two logs' records (none: the same records)."""
    left, right = read_records(a), read_records(b)
    lines = []
    if len(left) != len(right):
        lines.append(f"{len(left)} records against {len(right)}")
    for n, (x, y) in enumerate(zip(left, right, strict=False)):
        for where, u, v in differences(x, y):
            kind = x.get("kind") if isinstance(x, dict) else None
            lines.append(f"record {n} ({kind}) {where}: {json.dumps(u)} != {json.dumps(v)}")
    return lines


def record(out: Path, checkout: Path) -> int:
    """Run the demo's events on `checkout` and copy its audit log to `out`."""
    sys.path.insert(0, str(checkout / "examples"))
    import run_demo  # type: ignore[import-not-found]  # the checkout's own demo driver

    # under the checkout, as the demo does: the workspace is bind-mounted into containers
    (checkout / ".demo").mkdir(exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="run-", dir=checkout / ".demo"))
    os.chmod(base, 0o755)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            code: int = run_demo.run_demo(base)
        shutil.copyfile(base / "state" / "audit.log", out)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    count = len(out.read_text().splitlines())
    print(f"same_records: {count} records in {out} (demo exit {code})")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.same_records", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="the demo's audit records from this checkout")
    rec.add_argument("out", type=Path)
    cmp = commands.add_parser("compare", help="two such logs, run-specific values aside")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    for name in ("a", "b"):
        if args.command == "compare" and not getattr(args, name).is_file():
            parser.error(f"{getattr(args, name)}: no such file (make it with `record`)")
    if args.command == "record":
        return record(args.out, Path.cwd())
    lines = compare(args.a, args.b)
    for line in lines:
        print(line)
    count = len(read_records(args.a))
    print(f"same_records: {args.a} and {args.b}: {count} records, {len(lines)} differences")
    return 0 if not lines else 1


if __name__ == "__main__":
    raise SystemExit(main())
