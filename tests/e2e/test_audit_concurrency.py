"""Twenty real processes appending to one audit log at once: one intact, verifiable chain.

No Docker: the processes are plain Python writers, so the test is about the file protocol
(flock on audit.log.lock, re-reading the tail under the lock, rotation under contention).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
WRITERS = 20
RECORDS_EACH = 40

# Each writer waits on stdin so all twenty start appending together.
WRITER = """
import sys
from cloudrunner.audit import AuditWriter
path, name, count, max_bytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with AuditWriter(path, worker=name, max_bytes=max_bytes) as writer:
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(count):
        writer.append("hook", {"writer": name, "i": i, "command": "echo password=hunter2"})
    print(len(writer.acknowledged), flush=True)
"""


def run_writers(log: Path, *, max_bytes: int) -> list[int]:
    """Start WRITERS processes, release them at once; returns each one's torn-ack count."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(log),
                f"w{n:02d}",
                str(RECORDS_EACH),
                str(max_bytes),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
        )
        for n in range(WRITERS)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        acks = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err.decode()
            acks.append(int(out))
        return acks
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def verify(log: Path) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "audit", "verify", "--format", "json", str(log)],
        capture_output=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    return proc.returncode, json.loads(proc.stdout)


def records(report: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name in report["files"]:
        for line in Path(name).read_bytes().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


@pytest.mark.parametrize("max_bytes", [64 * 1024 * 1024, 32 * 1024], ids=["one-file", "rotating"])
def test_twenty_concurrent_writers_keep_one_intact_chain(tmp_path: Path, max_bytes: int) -> None:
    log = tmp_path / "audit.log"
    run_writers(log, max_bytes=max_bytes)
    rc, report = verify(log)
    assert rc == 0, report["problems"]
    assert report["records"] == WRITERS * RECORDS_EACH
    assert (report["first_seq"], report["last_seq"]) == (0, WRITERS * RECORDS_EACH - 1)
    if max_bytes < 1024 * 1024:
        assert len(report["files"]) > 2  # rotation happened while all twenty were writing
    # Every writer's records are all there, once each, in the order it wrote them.
    by_writer: dict[str, list[int]] = defaultdict(list)
    for record in records(report):
        by_writer[record["writer"]].append(record["i"])
        assert record["command"] == "echo password=[REDACTED]"
    assert len(by_writer) == WRITERS
    assert all(seen == list(range(RECORDS_EACH)) for seen in by_writer.values())


def test_a_torn_tail_is_acknowledged_once_by_twenty_racing_writers(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    torn = b'{"command":"echo hi","ki'  # a first writer died mid-record
    log.write_bytes(torn)
    acks = run_writers(log, max_bytes=64 * 1024 * 1024)
    assert sorted(acks) == [0] * (WRITERS - 1) + [1]
    rc, report = verify(log)
    assert rc == 0, report["problems"]
    assert [(t["offset"], t["length"], t["acknowledged_by"]) for t in report["torn"]] == [
        (0, len(torn), 0)
    ]
    assert report["records"] == WRITERS * RECORDS_EACH + 1
