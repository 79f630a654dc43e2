"""The DESIGN.md performance targets, checked against a run's rows (reported, never asserted)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.results import Report, Row
from bench.summary import figures


def _row(report: Report, key: str) -> Row | None:
    row = report.row(key)
    return row if row is not None and row.samples_ms else None


def evaluate(report: Report) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def target(name: str, check: Callable[[], tuple[bool, str] | None]) -> None:
        found = check()
        met, measured = found if found is not None else (None, "not measured in this run")
        out.append({"target": name, "met": met, "measured": measured})

    def session_overhead() -> tuple[bool, str] | None:
        bare = _row(report, "sandbox/cat/bare/host")
        session = _row(report, "sandbox/cat/session/runc")
        if bare is None or session is None:
            return None
        d50 = session.summary.p50 - bare.summary.p50
        d99 = session.summary.p99 - bare.summary.p99
        return d50 <= 3 and d99 <= 10, f"{d50:+.2f} ms at p50, {d99:+.2f} ms at p99"

    def hook_vs_docker() -> tuple[bool, str] | None:
        hook = _row(report, "sandbox/cat/hook/runc")
        plain = _row(report, "sandbox/cat/docker run/runc")
        if hook is None or plain is None:
            return None
        r = hook.summary.p50 / plain.summary.p50
        return r <= 1.2, f"{r:.2f}x a plain docker run at p50"

    def client() -> tuple[bool, str] | None:
        row = _row(report, "end_to_end/cat/hook client, daemon up/runc")
        if row is None:
            return None
        return row.summary.p50 < 25, f"{row.summary.p50:.2f} ms p50"

    def rate() -> tuple[bool, str] | None:
        row = report.row("throughput/cat/8 sessions/runc")
        if row is None:
            return None
        value = float(row.extra["events_per_s"])
        return value >= 300, f"{value:.0f} events/s"

    def sixteen() -> tuple[bool, str] | None:
        one = _row(report, "scaling/cat/1 hook, 1 source/runc")
        many = _row(report, "scaling/cat/16 hooks, 1 source/runc")
        if one is None or many is None:
            return None
        r = many.summary.p50 / one.summary.p50
        return r < 2, f"{r:.2f}x one hook at p50"

    def memory() -> tuple[bool, str] | None:
        row = report.row("throughput/cat/8 sessions/runc")
        if row is None:
            return None
        value = float(row.extra["peak_rss_mb"])
        return value < 100, f"{value:.1f} MB peak RSS of the daemon"

    def daemon_overhead() -> tuple[bool, str] | None:
        found = figures(report)
        if "daemon_overhead_p50_ms" not in found:
            return None
        d50, d99 = found["daemon_overhead_p50_ms"], found["daemon_overhead_p99_ms"]
        return d50 <= 1.5 and d99 <= 10, f"{d50:+.2f} ms at p50, {d99:+.2f} ms at p99"

    def client_floor() -> tuple[bool, str] | None:
        found = figures(report)
        if "client_over_interpreter_ms" not in found:
            return None
        text = [f"`cloudrunner hook` {found['client_over_interpreter_ms']:+.2f} ms"]
        if "client_is_over_interpreter_ms" in found:
            text.append(
                f"`python3 -IS cloudrunner hook` {found['client_is_over_interpreter_ms']:+.2f} ms"
            )
        met = found["client_over_interpreter_ms"] <= 2
        if "client_own_over_interpreter_ms" in found:
            own = found["client_own_over_interpreter_ms"]
            text.append(f"without the daemon's answer {own:+.2f} ms")
        return met, ", ".join(text) + " over the interpreter at p50"

    def rate400() -> tuple[bool, str] | None:
        row = report.row("throughput/cat/8 sessions/runc")
        if row is None:
            return None
        value = float(row.extra["events_per_s"])
        return value >= 400, f"{value:.0f} events/s"

    def at_most(key: str, limit: float, text: str) -> Callable[[], tuple[bool, str] | None]:
        """A target on one figure of `bench.summary`: met when it is at most `limit`."""

        def check() -> tuple[bool, str] | None:
            found = figures(report)
            return None if key not in found else (found[key] <= limit, text.format(found[key]))

        return check

    target(
        "session mode, trivial hook: <= 3 ms over bare at p50, <= 10 ms at p99", session_overhead
    )
    target(
        "in-daemon overhead, trivial warm hook: <= 1.5 ms p50, <= 10 ms p99 over the bare "
        "subprocess (issue 17)",
        daemon_overhead,
    )
    target("`cloudrunner hook` p50 within 2 ms of `python3 -I -S -c pass` (issue 17)", client_floor)
    target(">= 400 trivial events/s over 8 concurrent sessions (issue 17)", rate400)
    target(
        "`cloudrunner-hook` at most 1 ms p50 over the daemon HTTP request (issue 24)",
        at_most("compiled_over_request_ms", 1, "{:+.2f} ms p50 over the daemon HTTP request"),
    )
    target(
        "a trivial warm hook through `cloudrunner-hook` at most 3x bare `sh -c cat` at p50 "
        "(issue 24)",
        at_most("compiled_x_bare", 3, "{:.2f}x bare at p50"),
    )
    target(
        "tracing on (a collector on loopback) at most +0.3 ms p50 over tracing off (issue 38)",
        at_most("tracing_on_over_off_p50_ms", 0.3, "{:+.2f} ms p50 over tracing off"),
    )
    target("hook mode within 1.2x of a plain docker run (p50)", hook_vs_docker)
    target("per-event client under 25 ms p50 with the daemon up", client)
    target(">= 300 trivial events/s over 8 concurrent sessions", rate)
    target("16 hooks in one source cost under 2x one hook (session mode, p50)", sixteen)
    target("worker resident memory under 100 MB with 8 warm sessions", memory)
    return out
