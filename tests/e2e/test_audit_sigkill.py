"""A writer killed with SIGKILL in the middle of a record: the next process acknowledges the
torn bytes, continues the chain, and `cloudrunner audit verify` passes and reports them.

The victim writes one multi-megabyte record (one write(2)); the test watches the file grow
and sends SIGKILL as soon as the first bytes of that record land, so the kernel stops the
copy part-way. A write that completes before the signal arrives is simply tried again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
RECORD_CHARS = 4_000_000
ATTEMPTS = 12

VICTIM = """
import sys
from cloudrunner.audit import AuditWriter
path, chars = sys.argv[1], int(sys.argv[2])
writer = AuditWriter(path, worker="victim", fsync="never", max_bytes=None)
writer.append("hook", {"phase": "before"})
print("ready", flush=True)
sys.stdin.readline()
# in the payload of a decision: the one place a record keeps long text whole
writer.append("decision", {"phase": "big", "payload": {"command": "x" * chars}})
"""

NEXT_RUN = """
import sys
from cloudrunner.audit import AuditWriter
with AuditWriter(sys.argv[1], worker="next", on_torn=lambda ack: print(ack.message())) as w:
    w.append("hook", {"phase": "after"})
"""


def kill_mid_record(log: Path) -> tuple[int, int] | None:
    """Run the victim and SIGKILL it mid-record; (start, end) of the torn bytes, or None."""
    log.unlink(missing_ok=True)
    victim = subprocess.Popen(
        [sys.executable, "-c", VICTIM, str(log), str(RECORD_CHARS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert victim.stdout is not None and victim.stdout.readline() == b"ready\n"
        start = log.stat().st_size
        assert victim.stdin is not None
        victim.stdin.write(b"go\n")
        victim.stdin.flush()
        # Polled without a pause (the kill must land mid-record); bounded by the victim's own
        # life too: it exits once its record is written.
        wait_for(
            lambda: log.stat().st_size != start or victim.poll() is not None,
            "the victim writing its record", interval_s=0,
        )  # fmt: skip
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=60)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
    data = log.read_bytes()
    if data.endswith(b"\n"):
        return None  # the record was complete before the signal landed
    assert victim.returncode == -signal.SIGKILL
    return start, len(data)


def test_a_writer_killed_mid_record_leaves_a_chain_the_next_run_continues(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    torn = None
    for _ in range(ATTEMPTS):
        torn = kill_mid_record(log)
        if torn is not None:
            break
    assert torn is not None, f"SIGKILL never landed mid-write in {ATTEMPTS} attempts"
    start, end = torn
    torn_bytes = log.read_bytes()[start:end]
    assert torn_bytes.startswith(b'{"') and len(torn_bytes) < RECORD_CHARS

    # Until a writer comes along, verify says the log holds an unacknowledged torn record.
    before = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "audit", "verify", str(log)],
        capture_output=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip
    assert before.returncode == 1
    assert f"{log}:2: {end - start} bytes at offset {start}" in before.stdout.decode()

    # The next run (the killed writer's flock died with it) acknowledges and goes on.
    after = subprocess.run(
        [sys.executable, "-c", NEXT_RUN, str(log)],
        capture_output=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip
    assert after.returncode == 0, after.stderr.decode()
    assert f"{end - start} bytes at offset {start}" in after.stdout.decode()
    assert log.read_bytes()[start:end] == torn_bytes  # never rewritten, never dropped

    text = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "audit", "verify", str(log)],
        capture_output=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip
    assert text.returncode == 0, text.stdout.decode()
    assert "1 torn record(s) acknowledged" in text.stdout.decode()

    report = json.loads(
        subprocess.run(
            [sys.executable, "-m", "cloudrunner", "audit", "verify", "--format", "json", str(log)],
            capture_output=True, cwd=REPO, timeout=120, check=True,
        ).stdout
    )  # fmt: skip
    assert report["ok"] is True
    assert [
        (t["line"], t["offset"], t["length"], t["acknowledged_by"]) for t in report["torn"]
    ] == [(2, start, end - start, 1)]
    assert report["records"] == 3  # before, torn_record, after: the big record never happened
    assert report["last_seq"] == 2
