"""What the audit pipeline's clean step (JSON values, digests, caps, redaction) costs per
record, on the daemon's hot path.

    .venv/bin/python bench/redaction_bench.py            # 20,000 events
    .venv/bin/python bench/redaction_bench.py --events 2000

Per event it cleans what the worker appends: two `hook` records (about 1 KB each, with
stdout/stderr excerpts) and one `decision` record whose payload carries a `tool_input`
with nested fields, ids that change from event to event (so the short-string cache does not
hide the cost) and, in one event of ten, a secret. It prints microseconds per record (the
fastest of 5 rounds) for the clean step as the writer runs it and for the excerpt helper.
Tests never assert on time; this prints figures.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import time
from collections.abc import Callable
from typing import Any

from cloudrunner.audit.processors import clean_record
from cloudrunner.audit.redaction import excerpt

STDERR = (
    "checking command against policy\n"
    '{"conversation_id": "c", "hook_event_name": "preToolUse", "tool_input": '
    '{"command": "npm test", "cwd": "/work/repo"}}\n'
    "policy: allow (no rule matched)\n"
)


def event_records(n: int) -> list[dict[str, Any]]:
    conversation = f"conv-{n // 40}-2f1c9e0a4b2d41c7"
    generation = f"gen-{n}-9b2d4f1a"
    secret = n % 10 == 0
    tool_input: dict[str, Any] = {
        "command": f"npm test -- --grep case{n}"
        + (" && export NPM_TOKEN=npm_abcdefghijklmnopqrstuvwxyz0123456789" if secret else ""),
        "cwd": "/work/repo",
        "env": {"CI": "true", "NODE_ENV": "test"},
        "description": "run the unit tests of the parser",
        "timeout": 120000,
    }
    payload = {
        "conversation_id": conversation,
        "generation_id": generation,
        "hook_event_name": "preToolUse",
        "model": "bench-model",
        "cursor_version": "1.7.0",
        "workspace_roots": ["/work/repo"],
        "user_email": "dev@example.invalid",
        "tool_name": "Shell",
        "tool_input": tool_input,
        "tool_use_id": f"toolu_{n:08d}",
    }
    ids = {"conversation_id": conversation, "generation_id": generation, "event": "preToolUse"}
    answer = {"permission": "allow"}
    hooks = [
        {
            **ids,
            "session": conversation,
            "source": source,
            "source_file": path,
            "source_hash": "ab" * 32,
            "hook_index": index,
            "command": command,
            "matcher": "Shell",
            "matched": True,
            "match_reason": f"matcher 'Shell' matched 'Shell' (event {n})",
            "outcome": "ok",
            "reason": "",
            "exit_code": 0,
            "merge_use": "decided: allow",
            "merge_fields": [{"field": "permission", "value": "allow", "use": "decided"}],
            "decision": answer,
            "commit": "3f1c9e0a4b2d41c7a9e5f0b1c2d3e4f5a6b7c8d9",
            "sandbox_id": f"{n:012x}",
            "image_digest": "sha256:" + "cd" * 32,
            "runtime": "runc",
            "limits": {"memory": 268435456, "pids_limit": 128, "network": "none"},
            "duration_ms": 41.2,
            "stdout_excerpt": excerpt(b'{"permission": "allow"}\n', 2048),
            "stderr_excerpt": excerpt(STDERR.encode(), 2048),
            "stdout_bytes": 24,
            "stderr_bytes": len(STDERR),
        }
        for index, (source, path, command) in enumerate(
            [
                ("enterprise", "/etc/cursor/hooks.json", "/etc/cursor/hooks/policy.sh"),
                ("project", "/work/repo/.cursor/hooks.json", ".cursor/hooks/guard.sh"),
            ]
        )
    ]
    decision = {
        **ids,
        "session": conversation,
        "workspace": "/work/repo",
        "commit": "3f1c9e0a4b2d41c7a9e5f0b1c2d3e4f5a6b7c8d9",
        "payload": payload,
        "decision": answer,
        "blocked_by": None,
        "hooks": 2,
    }
    return [{**h, "kind": "hook"} for h in hooks] + [{**decision, "kind": "decision"}]


def writers_clean_step() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The clean step as the writer runs it (record size bounded, where this version of
    cloudrunner bounds it)."""
    if "bounded" in inspect.signature(clean_record).parameters:
        return functools.partial(clean_record, include_payload_text=False, bounded=True)
    return functools.partial(clean_record, include_payload_text=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    records = [r for n in range(args.events) for r in event_records(n)]
    clean_us = []
    excerpt_us = []
    stderr = STDERR.encode() * 8
    clean = writers_clean_step()
    for _ in range(args.rounds):
        started = time.perf_counter()
        for fields in records:
            clean(fields)
        clean_us.append((time.perf_counter() - started) / len(records) * 1e6)
        started = time.perf_counter()
        for n in range(args.events):
            excerpt(stderr + str(n).encode(), 2048)
        excerpt_us.append((time.perf_counter() - started) / args.events * 1e6)
    print(f"records: {len(records)} ({args.events} events), rounds: {args.rounds}")
    # the fastest round: the machine is shared, a slower round measured someone else too
    print(f"clean step: {min(clean_us):.1f} µs per record (fastest round)")
    print(f"excerpt (9 KB stderr, cap 2048): {min(excerpt_us):.1f} µs per excerpt (fastest round)")


if __name__ == "__main__":
    main()
