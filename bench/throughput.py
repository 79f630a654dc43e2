"""Part 3: events per second through one daemon with 1, 8 and 32 concurrent sessions (each a
conversation with its own warm sandbox, sending trivial events back to back over the unix
socket), and the daemon's peak resident memory while they run."""

from __future__ import annotations

import threading
import time

from bench.cases import CAT, EVENT
from bench.daemon import DaemonProcess, RssSampler, cpu_seconds, memory_kib
from bench.in_process import event
from bench.results import Report, Row
from bench.sandbox_modes import bare_key

SECTION = "throughput"
LEVELS = (1, 8, 32)


def measure(
    report: Report,
    daemon: DaemonProcess,
    *,
    events_per_level: int,
    runtime: str,
    levels: tuple[int, ...] = LEVELS,
) -> None:
    for sessions in levels:
        per_session = max(2, events_per_level // sessions)
        payloads = [event(f"bench-tp{sessions}-{i}") for i in range(sessions)]
        _run_all(daemon, payloads, 1, [])  # warm: each conversation starts its sandbox
        latencies: list[float] = []
        with RssSampler(daemon.pid) as rss:
            cpu_before = cpu_seconds(daemon.pid)
            started = time.perf_counter()
            _run_all(daemon, payloads, per_session, latencies)
            elapsed = time.perf_counter() - started
            cpu = cpu_seconds(daemon.pid) - cpu_before
        total = sessions * per_session
        rate = total / elapsed
        peak_mb = rss.peak_kib / 1024
        report.add(
            Row(
                SECTION,
                CAT.name,
                f"{sessions} session{'s' if sessions > 1 else ''}",
                runtime,
                latencies,
                bare_key(CAT),
                extra={
                    "events": total,
                    "seconds": round(elapsed, 3),
                    "events_per_s": round(rate, 1),
                    "peak_rss_mb": round(peak_mb, 1),
                    # the daemon's own CPU per event (all its threads): what a busy machine
                    # changes least, so the figure to compare across runs
                    "daemon_cpu_ms_per_event": round(cpu * 1000 / total, 3),
                    "warm_sandboxes": sessions,
                    "daemon_vmhwm_mb": round(memory_kib(daemon.pid).get("VmHWM", 0) / 1024, 1),
                },
                note=f"{rate:.0f} events/s, daemon peak RSS {peak_mb:.0f} MB, "
                f"daemon CPU {cpu * 1000 / total:.2f} ms/event",
            )
        )
        for i in range(sessions):  # end the conversations: their sandboxes go
            daemon.post("/v1/events/sessionEnd", _session_end(f"bench-tp{sessions}-{i}"))


def _session_end(conversation: str) -> bytes:
    import json

    return json.dumps(
        {"hook_event_name": "sessionEnd", "conversation_id": conversation, "reason": "completed"}
    ).encode()


def _run_all(
    daemon: DaemonProcess, payloads: list[bytes], count: int, latencies: list[float]
) -> None:
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(len(payloads))

    def session(payload: bytes) -> None:
        mine = []
        start.wait()
        for _ in range(count):
            t0 = time.perf_counter()
            try:
                status, answer = daemon.post(f"/v1/events/{EVENT}", payload)
            except Exception as exc:  # reported below: a failed event is no figure
                errors.append(str(exc))
                return
            mine.append((time.perf_counter() - t0) * 1000.0)
            if status != 200 or answer.get("permission") != "allow":
                errors.append(f"{status} {answer!r}")
                return
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=session, args=(p,)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"throughput: {len(errors)} events failed, first: {errors[0]}")
