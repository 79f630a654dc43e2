"""Group commit under a crash: a process appending from 8 threads with fsync "always" is
killed with SIGKILL; every record whose `append` had returned (and was reported) is in the
log with the hash it was given, and the next writer continues one verifiable chain."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from cloudrunner.audit import AuditWriter, verify_log

REPO = Path(__file__).resolve().parents[2]
REPORTED = 400

APPENDER = """
import sys, threading
from cloudrunner.audit import AuditWriter
writer = AuditWriter(sys.argv[1], worker="victim", fsync="always", max_bytes=20_000)
out = threading.Lock()

def run(index):
    i = 0
    while True:
        records = writer.append_many([("hook", {"t": index, "i": i}), ("decision", {"t": index})])
        i += 1
        with out:
            for record in records:
                sys.stdout.write(f"{record['seq']} {record['hash']}\\n")
            sys.stdout.flush()

for n in range(8):
    threading.Thread(target=run, args=(n,), daemon=True).start()
threading.Event().wait()
"""


def test_what_append_returned_survives_a_sigkill_and_the_chain_goes_on(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    victim = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(log)], stdout=subprocess.PIPE, cwd=REPO
    )
    reported: dict[int, str] = {}
    try:
        assert victim.stdout is not None
        while len(reported) < REPORTED:
            line = victim.stdout.readline()
            assert line, "the appender exited early"
            seq, digest = line.decode().split()
            reported[int(seq)] = digest
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=60)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
    assert victim.returncode == -signal.SIGKILL

    on_disk: dict[int, str] = {}
    for path in [log, *sorted(tmp_path.glob("audit.log.*"))]:
        for line in path.read_bytes().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line torn by the kill: acknowledged below
            on_disk[record["seq"]] = record["hash"]
    for seq, digest in reported.items():
        assert on_disk.get(seq) == digest, f"record {seq} was reported written but is not"

    with AuditWriter(log, worker="next", fsync="always") as writer:
        writer.append("hook", {"after": True})
    report = verify_log(log)
    assert report.ok, report
    assert report.records >= len(reported) + 1
