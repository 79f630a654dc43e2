"""`audit query` and `audit stats` over a large audit log (default 1,000,000 records).

    .venv/bin/python bench/audit_bench.py                     # 1,000,000 records
    .venv/bin/python bench/audit_bench.py --records 200000 --keep /var/tmp/audit-bench

The log is made in the real format: the first `--through-writer` records go through
`AuditWriter` (the worker's pipeline: digests, redaction, chain), the rest come from a
generator that continues the same chain (canonical JSON, seq, prev_hash, hash), rotating
like the writer does (64 MiB files by default), so `audit verify` accepts the whole set.
Records are shaped like the worker's: per event one `decision` record and its `hook`
records, about 1 KB each (the README's typical hook record). Then it times, each as its own
`cloudrunner` process (what an operator runs): filtered queries (table and JSON lines) and
`audit stats` (table and json), wall-clock and CPU time. Target (issue 9): under 10 s each
on the project's 2-core machine. Tests never assert on time; this prints figures.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cloudrunner.audit import AuditWriter, canonical_json
from cloudrunner.audit.digest import digest_text
from cloudrunner.audit.rotation import rotated_path

EVENTS = ("beforeShellExecution", "afterFileEdit", "stop", "beforeSubmitPrompt", "preToolUse")
HOOKS = {
    "beforeShellExecution": [("enterprise", "/etc/cursor/hooks/audit.sh"),
                             ("project", ".cursor/hooks/guard.sh")],
    "afterFileEdit": [("project", "python3 .cursor/hooks/format.py")],
    "stop": [("project", ".cursor/hooks/open-todos.sh")],
    "beforeSubmitPrompt": [("enterprise", "/etc/cursor/hooks/no-secrets.py")],
    "preToolUse": [("team", "/opt/team/hooks/policy.sh"), ("project", ".cursor/hooks/tool.sh")],
}  # fmt: skip
COMMANDS = ("ls -la", "git status", "rm -rf build", "curl https://example.invalid", "make test")
OUTCOMES = ["ok"] * 90 + ["blocked"] * 6 + ["error"] * 2 + ["timeout", "sandbox_error"]


def event_records(rng: random.Random, n: int, start: float) -> Iterator[dict[str, Any]]:
    """Records of `n`-th event: its hooks, then its decision (as the worker appends them)."""
    event = EVENTS[n % len(EVENTS)]
    conversation = f"conv-{n // 40}"
    moment = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start + n * 0.5))
    stamp = f"{moment}.{n % 1000000:06d}Z"
    payload: dict[str, Any] = {
        "conversation_id": conversation, "generation_id": f"gen-{n}",
        "hook_event_name": event, "model": "bench-model", "cursor_version": "1.7.0",
        "workspace_roots": ["/work/repo"],
    }  # fmt: skip
    if event == "beforeShellExecution":
        payload.update(command=rng.choice(COMMANDS), cwd="/work/repo")
    elif event == "beforeSubmitPrompt":
        payload["prompt"] = dict(digest_text(f"prompt {n}"))
    blocked = False
    for index, (source, command) in enumerate(HOOKS[event]):
        outcome = rng.choice(OUTCOMES)
        blocked = blocked or outcome == "blocked"
        yield {
            "kind": "hook", "time": stamp, "worker": "bench", "pid": 4242,
            "conversation_id": conversation, "generation_id": f"gen-{n}", "event": event,
            "session": conversation, "source": source,
            "source_file": f"/work/repo/.cursor/hooks.json#{source}",
            "source_hash": hashlib.sha256(source.encode()).hexdigest(),
            "hook_index": index, "command": command, "matcher": None, "matched": True,
            "match_reason": "no matcher", "outcome": outcome, "reason": None,
            "exit_code": 2 if outcome == "blocked" else 0,
            "merge_use": "decided" if outcome == "blocked" else "no answer",
            "merge_fields": [], "decision": {"permission": "deny" if blocked else "allow"},
            "commit": "a" * 40, "sandbox_id": "c" * 64, "image_digest": "sha256:" + "d" * 64,
            "runtime": "runc",
            "limits": {"memory": 536870912, "memory_swap": 536870912, "cpu_quota": 100000,
                       "cpu_period": 100000, "pids_limit": 256, "network": "none",
                       "read_only_rootfs": True, "timeout_s": 60.0},
            "duration_ms": round(rng.lognormvariate(1.8, 0.6), 3),
            "stdout_excerpt": "", "stderr_excerpt": "", "stdout_bytes": 0, "stderr_bytes": 0,
        }  # fmt: skip
    answer = {"permission": "deny" if blocked else "allow"}
    if event == "stop":
        answer = {"followup_message": "finish TODO.md"} if n % 3 == 0 else {}
    yield {
        "kind": "decision", "time": stamp, "worker": "bench", "pid": 4242,
        "conversation_id": conversation, "generation_id": f"gen-{n}", "event": event,
        "session": conversation, "workspace": "/work/repo", "commit": "a" * 40,
        "payload": payload, "decision": answer, "blocked_by": None,
        "hooks": len(HOOKS[event]),
    }  # fmt: skip


def generate(log: Path, records: int, through_writer: int, max_bytes: int) -> None:
    rng = random.Random(9)
    start = time.time() - 86400
    source = (r for n in range(records) for r in event_records(rng, n, start))
    with AuditWriter(log, worker="bench", fsync="never", max_bytes=max_bytes) as writer:
        for _ in range(through_writer):
            fields = next(source)
            writer.append(fields.pop("kind"), fields)
    # Continue the chain the writer left, in its format, rotating as it would.
    tail = log.read_bytes().splitlines()[-1]
    import json

    last = json.loads(tail)
    seq, prev = last["seq"], last["hash"]
    out = log.open("ab")
    size = log.stat().st_size
    for fields in source:
        if seq + 1 >= records:
            break
        fields["pid"] = os.getpid()
        seq += 1
        fields["seq"], fields["prev_hash"] = seq, prev
        body = canonical_json(fields)
        prev = hashlib.sha256(body.encode("ascii")).hexdigest()
        fields["hash"] = prev
        line = (canonical_json(fields) + "\n").encode("ascii")
        if size + len(line) > max_bytes:
            out.close()
            rotate(log)
            out, size = log.open("ab"), 0
        out.write(line)
        size += len(line)
    out.close()


def rotate(log: Path) -> None:
    numbers = sorted(
        (int(p.name.rsplit(".", 1)[1]) for p in log.parent.glob(log.name + ".*")
         if p.name.rsplit(".", 1)[1].isdigit()),
        reverse=True,
    )  # fmt: skip
    for number in numbers:
        os.rename(rotated_path(log, number), rotated_path(log, number + 1))
    os.rename(log, rotated_path(log, 1))


def timed(argv: list[str]) -> tuple[float, float, str]:
    """Wall-clock seconds, CPU seconds (user + system, every process of the command) and
    the output of one `cloudrunner` run. CPU time shows what other work on the machine
    took from the wall-clock figure."""
    cloudrunner = str(Path(sys.executable).with_name("cloudrunner"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    begin = time.perf_counter()
    proc = subprocess.run([cloudrunner, *argv], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - begin
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr}")
    return elapsed, cpu, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--through-writer", type=int, default=5000)
    parser.add_argument("--max-bytes", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--keep", type=Path, help="make (or reuse) the log in this directory")
    parser.add_argument("--verify", action="store_true", help="also time `audit verify`")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="audit-bench-"))
    log = base / "audit.log"
    try:
        if not log.exists():
            base.mkdir(parents=True, exist_ok=True)
            begin = time.perf_counter()
            generate(log, args.records, args.through_writer, args.max_bytes)
            made = time.perf_counter() - begin
            print(f"generated {args.records} records in {made:.1f} s", file=sys.stderr)
        files = sorted(base.glob("audit.log*"))
        total = sum(p.stat().st_size for p in files)
        print(f"log: {log}: {len(files)} files, {total / 2**20:.0f} MiB")
        runs = [
            ("query, 3 filters, table", ["audit", "query", str(log), "--event",
             "beforeShellExecution", "--outcome", "blocked", "--source", "project"]),
            ("query --decision deny, json", ["audit", "query", str(log), "--kind", "decision",
             "--decision", "deny", "--format", "json"]),
            ("query, time range, table", ["audit", "query", str(log), "--since",
             "2000-01-01", "--command", "guard", "--limit", "100000"]),
            ("stats, table", ["audit", "stats", str(log)]),
            ("stats --format json", ["audit", "stats", str(log), "--format", "json"]),
        ]  # fmt: skip
        if args.verify:
            runs.append(("verify", ["audit", "verify", str(log)]))
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        for title, argv in runs:
            elapsed, cpu, out = timed(argv)
            lines = out.count("\n")
            print(f"{title:32} {elapsed:6.2f} s wall  {cpu:6.2f} s CPU  ({lines} lines out)")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
