"""The figures issue 17 asks for, from one run's rows, each next to the bare figure it is
compared with: the daemon's overhead over the bare hook, the client over the bare
interpreter, events/s and the daemon's memory at 1, 8 and 32 sessions."""

from __future__ import annotations

from typing import Any

from bench import end_to_end, tracing_cost
from bench.cases import CAT as CAT_CASE
from bench.results import Report, Row
from bench.sandbox_modes import bare_key

CAT = CAT_CASE.name


def _row(report: Report, section: str, mode: str, runtime: str = "runc") -> Row | None:
    row = report.row(f"{section}/{CAT}/{mode}/{runtime}")
    return row if row is not None and row.samples_ms else None


def figures(report: Report) -> dict[str, Any]:
    """Named figures (ms, ratios, events/s, MB); a part not run leaves its figures out."""
    out: dict[str, Any] = {}
    bare = _row(report, "end_to_end", end_to_end.BARE) or report.row(bare_key(CAT_CASE))
    request = _row(report, "end_to_end", end_to_end.REQUEST)
    interpreter = _row(report, "end_to_end", end_to_end.INTERPRETER)
    if bare is not None and request is not None:
        b, r = bare.summary, request.summary
        out["daemon_overhead_p50_ms"] = r.p50 - b.p50
        out["daemon_overhead_p99_ms"] = r.p99 - b.p99
        out["daemon_request_x_bare"] = r.p50 / b.p50
    sync = _row(report, "end_to_end", end_to_end.SYNC)
    if sync is not None:
        out["audit_syncs_p50_ms"] = 2 * sync.summary.p50
    # Where the overhead goes, each step the p50 difference of two rows of the same run.
    front = _row(report, "end_to_end", end_to_end.FRONT)
    no_hook = _row(report, "end_to_end", end_to_end.NO_HOOK)
    if front is not None and no_hook is not None and request is not None and bare is not None:
        out["front_p50_ms"] = front.summary.p50
        out["event_over_front_ms"] = no_hook.summary.p50 - front.summary.p50
        out["sandbox_hook_ms"] = request.summary.p50 - no_hook.summary.p50
        out["sandbox_hook_over_bare_ms"] = out["sandbox_hook_ms"] - bare.summary.p50
    for key, mode in (("client", end_to_end.CLIENT), ("client_is", end_to_end.CLIENT_IS)):
        row = _row(report, "end_to_end", mode)
        if row is None or interpreter is None:
            continue
        c, i = row.summary.p50, interpreter.summary.p50
        out[f"{key}_p50_ms"] = c
        out[f"{key}_x_interpreter"] = c / i
        out[f"{key}_over_interpreter_ms"] = c - i
        if request is not None:
            # What the client process itself adds to the daemon's answer, over the floor.
            out[f"{key}_own_over_interpreter_ms"] = c - request.summary.p50 - i
    compiled = _row(report, "end_to_end", end_to_end.COMPILED)
    if compiled is not None:
        out["compiled_p50_ms"] = compiled.summary.p50
        if request is not None:
            # What the compiled client's process adds to the daemon's answer made in process.
            out["compiled_over_request_ms"] = compiled.summary.p50 - request.summary.p50
        if bare is not None:
            out["compiled_x_bare"] = compiled.summary.p50 / bare.summary.p50
    if interpreter is not None:
        out["interpreter_p50_ms"] = interpreter.summary.p50
    # Tracing (issue 38): the two daemons' rows and the bare hook taken beside them.
    off = _row(report, "end_to_end", tracing_cost.OFF)
    on = _row(report, "end_to_end", tracing_cost.ON)
    beside = _row(report, "end_to_end", tracing_cost.BARE)
    if off is not None and on is not None and beside is not None:
        out["tracing_off_x_bare"] = off.summary.p50 / beside.summary.p50
        out["tracing_on_x_bare"] = on.summary.p50 / beside.summary.p50
        out["tracing_on_over_off_p50_ms"] = on.summary.p50 - off.summary.p50
        out["tracing_on_over_off_p99_ms"] = on.summary.p99 - off.summary.p99
        if request is not None:
            # the daemon of part 2 (no [telemetry]) against the untraced daemon of part 6
            out["tracing_off_over_request_p50_ms"] = off.summary.p50 - request.summary.p50
    bare_rate = 1000.0 / bare.summary.p50 if bare is not None else None
    for sessions in (1, 4, 8, 32):
        row = report.row(f"throughput/{CAT}/{sessions} session{'s' if sessions > 1 else ''}/runc")
        if row is None:
            continue
        rate = float(row.extra["events_per_s"])
        out[f"events_per_s_{sessions}"] = rate
        out[f"peak_rss_mb_{sessions}"] = float(row.extra["peak_rss_mb"])
        if "daemon_cpu_ms_per_event" in row.extra:
            out[f"daemon_cpu_ms_per_event_{sessions}"] = float(row.extra["daemon_cpu_ms_per_event"])
        if bare_rate:
            out[f"events_per_s_{sessions}_x_bare_rate"] = rate / bare_rate
    return out


def render(found: dict[str, Any]) -> list[str]:
    lines = ["figures (issue 17; each against the bare figure of the same run):"]
    if "daemon_overhead_p50_ms" in found:
        lines.append(
            f"  in-daemon overhead, trivial warm hook: {found['daemon_overhead_p50_ms']:+.2f} ms "
            f"at p50, {found['daemon_overhead_p99_ms']:+.2f} ms at p99 over the bare "
            f"`sh -c cat` ({found['daemon_request_x_bare']:.2f}x bare at p50)"
            + (
                f"; of which {found['audit_syncs_p50_ms']:.2f} ms are the two audit syncs every "
                "event waits for"
                if "audit_syncs_p50_ms" in found
                else ""
            )
        )
    if "front_p50_ms" in found:
        lines.append(
            f"  where it goes (p50): the HTTP front {found['front_p50_ms']:.2f} ms (GET /healthz "
            f"from the bench); an event no hook matches {found['event_over_front_ms']:+.2f} ms "
            "over that (the hand-over to an event thread, the worker, its records and their "
            f"one sync); a hook through its warm sandbox {found['sandbox_hook_ms']:.2f} ms "
            "(with the sync of the event's first record before it runs), "
            f"{found['sandbox_hook_over_bare_ms']:+.2f} ms over the bare `sh -c cat`"
        )
    for key, name in (
        ("client", "cloudrunner hook"),
        ("client_is", "python3 -IS cloudrunner hook"),
    ):
        if f"{key}_p50_ms" not in found:
            continue
        own = found.get(f"{key}_own_over_interpreter_ms")
        lines.append(
            f"  `{name}`: {found[f'{key}_p50_ms']:.2f} ms p50 = "
            f"{found[f'{key}_x_interpreter']:.2f}x `python3 -I -S -c pass` "
            f"({found['interpreter_p50_ms']:.2f} ms), {found[f'{key}_over_interpreter_ms']:+.2f} ms"
            + (f"; without the daemon's answer {own:+.2f} ms" if own is not None else "")
        )
    if "compiled_p50_ms" in found:
        lines.append(
            f"  `cloudrunner-hook` (compiled): {found['compiled_p50_ms']:.2f} ms p50"
            + (
                f", {found['compiled_over_request_ms']:+.2f} ms over the daemon HTTP request "
                "made from the bench"
                if "compiled_over_request_ms" in found
                else ""
            )
            + (
                f", {found['compiled_x_bare']:.2f}x the bare `sh -c cat` end to end"
                if "compiled_x_bare" in found
                else ""
            )
        )
    if "tracing_on_over_off_p50_ms" in found:
        lines.append(
            f"  tracing (issue 38): off {found['tracing_off_x_bare']:.2f}x bare, on "
            f"{found['tracing_on_x_bare']:.2f}x bare at p50; on over off "
            f"{found['tracing_on_over_off_p50_ms']:+.2f} ms at p50, "
            f"{found['tracing_on_over_off_p99_ms']:+.2f} ms at p99"
        )
    for n in (1, 4, 8, 32):
        if f"events_per_s_{n}" not in found:
            continue
        x = found.get(f"events_per_s_{n}_x_bare_rate")
        ratio = f" ({x:.2f}x the bare hook run one at a time)" if x else ""
        cpu = found.get(f"daemon_cpu_ms_per_event_{n}")
        lines.append(
            f"  {n} session{'s' if n > 1 else ''}: {found[f'events_per_s_{n}']:.0f} events/s"
            f"{ratio}, daemon peak RSS {found[f'peak_rss_mb_{n}']:.0f} MB"
            + (f", daemon CPU {cpu:.2f} ms/event" if cpu is not None else "")
        )
    return lines if len(lines) > 1 else []
