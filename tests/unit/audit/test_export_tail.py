"""`audit export` (one JSON lines stream, chain kept) and `audit tail -f` across rotation."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from cloudrunner.audit import AuditWriter, record_hash
from cloudrunner.audit.export import EXPORT_KEYS
from cloudrunner.audit.reader import log_set
from cloudrunner.audit.tail import Follower
from cloudrunner.cli import main
from tests.unit.audit.logs import sample_records, write_log


def test_export_keeps_every_record_and_its_chain_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records() * 2, max_bytes=2000)
    out = tmp_path / "export.jsonl"
    assert main(["audit", "export", str(log), "-o", str(out)]) == 0
    assert "exported 24 records" in capsys.readouterr().err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["seq"] for r in lines] == list(range(24))
    for exported in lines:
        original = {k: v for k, v in exported.items() if k not in EXPORT_KEYS}
        assert record_hash(original) == exported["hash"]
        assert exported["@timestamp"] == exported["time"]
    first = lines[0]
    source = Path(first["audit_file"])
    assert source in log_set(log)
    assert json.loads(source.read_text().splitlines()[first["audit_line"] - 1])["seq"] == 0


@pytest.mark.parametrize("filters", [[], ["--event", "stop"], ["--kind", "decision"]])
def test_export_in_parallel_writes_what_one_process_writes(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes], filters: list[str]
) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records() * 3, max_bytes=1500)
    assert len(log_set(log)) > 3
    middle = log_set(log)[1]
    lines = middle.read_bytes().splitlines(keepends=True)
    middle.write_bytes(b"".join([*lines[:1], b'{"torn\n', *lines[1:]]))
    outputs = []
    for jobs in ("1", "2"):
        assert main(["audit", "export", str(log), "--jobs", jobs, *filters]) == 0
        outputs.append(capsysbinary.readouterr())
    single, parallel = outputs
    assert parallel.out == single.out and parallel.err == single.err
    assert b"a torn write" in parallel.err and parallel.out.count(b"\n") > 0


def test_export_to_stdout_merges_several_logs_by_time(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    write_log(a, sample_records()[:3])
    write_log(b, sample_records()[:2])
    assert main(["audit", "export", str(a), str(b)]) == 0
    lines = [json.loads(line) for line in capsysbinary.readouterr().out.splitlines()]
    assert len(lines) == 5
    assert [r["time"] for r in lines] == sorted(r["time"] for r in lines)
    assert {r["audit_file"] for r in lines} == {str(a), str(b)}


def test_the_follower_reads_across_several_rotations_without_loss(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    writer = AuditWriter(log, worker="w", fsync="never", max_bytes=600)
    writer.append("hook", {"n": 0})
    follower = Follower(log)
    seen = [json.loads(raw)["seq"] for _f, _n, raw in follower.poll()]
    # a burst that rotates the file more than once between two polls
    for n in range(1, 40):
        writer.append("hook", {"n": n, "pad": "x" * 100})
    assert len(log_set(log)) > 3
    seen += [json.loads(raw)["seq"] for _f, _n, raw in follower.poll()]
    for n in range(40, 45):
        writer.append("hook", {"n": n})
        seen += [json.loads(raw)["seq"] for _f, _n, raw in follower.poll()]
    follower.close()
    writer.close()
    assert seen == list(range(45))


def test_the_follower_loses_nothing_when_the_writer_rotates_during_a_poll(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.log"
    writer = AuditWriter(log, worker="w", fsync="never", max_bytes=600)
    writer.append("hook", {"n": 0})
    written = [1]

    class Racing(Follower):
        """Rotates the log once more just as the follower turns to the new live file,
        the window a loaded machine opens between two steps of a poll."""

        raced = False

        def _open(self, path: Path) -> bool:
            if path == log and not self.raced and written[0] > 1:
                self.raced = True
                before = len(log_set(log))
                while len(log_set(log)) == before:
                    writer.append("hook", {"n": written[0], "pad": "y" * 100})
                    written[0] += 1
            return super()._open(path)

    follower = Racing(log)
    seen = [json.loads(raw)["seq"] for _f, _n, raw in follower.poll()]
    for n in range(1, 12):
        writer.append("hook", {"n": n, "pad": "x" * 100})
        written[0] += 1
    seen += [json.loads(raw)["seq"] for _f, _n, raw in follower.poll()]
    seen += [json.loads(raw)["seq"] for _f, _n, raw in follower.poll()]
    assert follower.raced
    follower.close()
    writer.close()
    assert seen == list(range(written[0]))


def test_the_follower_never_returns_half_a_line(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records()[:1])
    follower = Follower(log)
    assert len(list(follower.poll())) == 1
    whole = (log.read_bytes().splitlines(keepends=True))[0]
    with log.open("ab") as handle:
        handle.write(whole[:30])
        handle.flush()
        assert list(follower.poll()) == []
        handle.write(whole[30:])
    assert [raw for _f, _n, raw in follower.poll()] == [whole.rstrip(b"\n")]
    follower.close()


def test_tail_prints_the_last_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records())
    assert main(["audit", "tail", str(log), "-n", "2", "--format", "json"]) == 0
    assert [json.loads(line)["seq"] for line in capsys.readouterr().out.splitlines()] == [10, 11]
    assert main(["audit", "tail", str(log), "-n", "1", "--kind", "gated"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.startswith("TIME") and "gated" in row and "gate closed" in row


def _lines(stream: IO[str]) -> queue.Queue[str]:
    """The stream's lines as they come, read by a thread, so a test waits with a limit."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in stream], daemon=True).start()
    return lines


def test_tail_follow_as_a_process_prints_new_records(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, sample_records()[:1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "cloudrunner", "audit", "tail", "-f", str(log), "--format",
         "json", "--interval", "0.05"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = _lines(proc.stdout)
        first = json.loads(lines.get(timeout=60))
        assert first["seq"] == 0
        stop = threading.Event()

        def write() -> None:
            with AuditWriter(log, worker="w", fsync="never", max_bytes=700) as writer:
                for n in range(8):
                    if stop.is_set():
                        return
                    writer.append("hook", {"n": n, "pad": "y" * 200})
                    time.sleep(0.01)  # pacing, not a wait: records come while tail follows

        thread = threading.Thread(target=write)
        thread.start()
        # a missing record fails here (queue.Empty) instead of hanging the suite
        got = [json.loads(lines.get(timeout=60))["seq"] for _ in range(8)]
        stop.set()
        thread.join()
        assert got == list(range(1, 9))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
