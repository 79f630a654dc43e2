"""One event of one repository, bare and through cloudrunner, on fresh layouts."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.parity import bare, compare, through
from bench.parity.cases import Event, Repository, fill, mark
from bench.parity.layout import LayoutError, lay_out, run_shell
from cloudrunner.protocol.events import CLOUD_EVENTS

CURSOR_VERSION = "1.7.52"


@dataclass(frozen=True)
class Options:
    worker_id: str
    runtime: str = "runc"
    profile: str = "cloud"
    #: timed repeats of the event (client and bare, alternating) after the compared run
    repeat: int = 5
    keep: bool = False
    #: how the client is started: "installed" (the `cloudrunner` command as pip installed
    #: it) or "isolated" (`python -IS <that file>`, the form the VM guide recommends)
    client: str = "installed"


def payload_bytes(event: Event, root: Path) -> bytes:
    return json.dumps(fill(dict(event.payload), str(root)), ensure_ascii=False).encode("utf-8")


def _fresh(repo: Repository, tree: Path, base: Path, side: str, event: Event) -> tuple[Path, Path]:
    """A fresh layout and an empty HOME for one side, with `pre` applied."""
    home = base / f"home-{side}"
    home.mkdir(parents=True)
    root = base / side / repo.short
    root.parent.mkdir(parents=True)
    root.parent.chmod(0o755)
    lay_out(repo, tree, root, home)
    if event.pre:
        run_shell(fill(event.pre, str(root)), root, home)
    return root, home


def _post(event: Event, root: Path, home: Path) -> str | None:
    if not event.post:
        return None
    out = run_shell(fill(event.post, str(root)), root, home, check=False)
    return str(mark(out, str(root), str(home)))


def run_event(
    repo: Repository, event: Event, tree: Path, base: Path, options: Options
) -> compare.Verdict:
    verdict = compare.Verdict(repo.name, event.id, event.event)
    if event.event not in CLOUD_EVENTS:
        verdict.skipped = (
            f"{event.event} is not sent by cloud agents: the cloud profile refuses it by "
            "design (a deliberate difference, not run)"
        )
        return verdict
    verdict.single_node_hook = compare.is_single_node_hook(event.expected_hooks)
    base.mkdir(parents=True)
    base.chmod(0o755)
    try:
        _run(repo, event, tree, base, options, verdict)
    except (LayoutError, through.DaemonFailed) as exc:
        verdict.error = str(exc)
    except subprocess.TimeoutExpired as exc:
        verdict.error = f"`{_command(exc.cmd)}` did not finish within {exc.timeout:g} s"
    finally:
        if not options.keep:
            shutil.rmtree(base, ignore_errors=True)
    return verdict


def _command(cmd: object) -> str:
    return " ".join(str(c) for c in cmd) if isinstance(cmd, list | tuple) else str(cmd)


def _run(
    repo: Repository,
    event: Event,
    tree: Path,
    base: Path,
    options: Options,
    verdict: compare.Verdict,
) -> None:
    expected = compare.expected_exits(event.expected_hooks)
    keys = event.compare

    # (a) bare, to confirm the recorded answer on this machine
    root_b, home_b = _fresh(repo, tree, base, "bare", event)
    first = bare.run(root_b, home_b, event.event, payload_bytes(event, root_b), CURSOR_VERSION)
    bare_answer = mark(first.answer, str(root_b), str(home_b))
    bare_hooks = [
        compare.HookExit(h.index, h.matched, h.exit_code, h.outcome, h.stderr) for h in first.hooks
    ]
    verdict.bare_answer_same = compare.same_answer(bare_answer, event.expected_answer, keys)
    verdict.bare_exits = compare.compare_exits(expected, bare_hooks)
    bare_post = _post(event, root_b, home_b)
    if event.post:
        verdict.bare_post_same = bare_post == event.expected_post

    # (b) through cloudrunner serve + cloudrunner hook
    root_c, home_c = _fresh(repo, tree, base, "cloudrunner", event)
    payload = payload_bytes(event, root_c)
    daemon = through.Daemon(
        base / "daemon", options.worker_id, options.runtime, options.profile, client=options.client
    )
    with daemon:
        call = daemon.send(event.event, payload)
        records = daemon.records(str(event.payload.get("generation_id") or ""))
        post = _post(event, root_c, home_c)
        for _ in range(options.repeat):
            verdict.client_ms.append(daemon.send(event.event, payload).wall_ms)
            again = bare.run(
                root_b, home_b, event.event, payload_bytes(event, root_b), CURSOR_VERSION
            )
            verdict.bare_ms.append(again.wall_ms)
        every_answer = daemon.records(str(event.payload.get("generation_id") or ""))
    verdict.sandbox_hook_ms = through.hook_durations_ms(every_answer)[1:]
    audited = through.audited_hooks(records)
    sandbox_hooks = [
        compare.HookExit(h.index, h.matched, h.exit_code, h.outcome, h.stderr, h.reason)
        for h in audited
    ]
    answer = None if call.answer is None else mark(call.answer, str(root_c), str(home_c))
    verdict.first_client_ms = call.wall_ms
    verdict.answer_same = compare.same_answer(answer, event.expected_answer, keys)
    verdict.exits = compare.compare_exits(expected, sandbox_hooks)
    if event.post:
        verdict.post_same = post == event.expected_post
    if any(h.matched for h in expected):
        verdict.ratio = compare.ratio(verdict.client_ms, verdict.bare_ms)
    extra = []
    if call.exit_code != 0 or call.answer is None:
        line = call.stderr.strip().splitlines()
        extra.append(f"client exit {call.exit_code}: {line[-1] if line else 'no stderr'}")
    extra.extend(through.other_records(records))
    facts = through.workspace_facts(root_c, through.hook_identity(records))
    verdict.causes = compare.explain(verdict, sandbox_hooks, str(root_c), extra, facts)
    verdict.details = _details(event, answer, bare_answer, post, bare_post, audited, first, root_c)
    verdict.details["workspace"] = {
        "owner_uid": facts.owner_uid,
        "mode": f"{facts.mode:04o}",
        "hook_uid": facts.hook_uid,
        "writable_by_hook_uid": facts.writable,
    }


def _details(
    event: Event,
    answer: Any,
    bare_answer: Any,
    post: str | None,
    bare_post: str | None,
    audited: list[through.AuditedHook],
    first: bare.BareResult,
    root_c: Path,
) -> dict[str, Any]:
    return {
        "expected_answer": event.expected_answer,
        "answer": answer,
        "bare_answer": bare_answer,
        "compare": list(event.compare) if event.compare else None,
        "expected_post": event.expected_post,
        "post": post,
        "bare_post": bare_post,
        "hooks": [
            {
                "index": h.index,
                "command": h.command,
                "expected_exit": next(
                    (e.get("exit_code") for e in event.expected_hooks if e["index"] == h.index),
                    None,
                ),
                "exit_code": h.exit_code,
                "outcome": h.outcome,
                "reason": h.reason,
                "stderr": mark(h.stderr, str(root_c)),
            }
            for h in audited
            if h.matched
        ],
        "bare_hooks": [
            {"index": h.index, "exit_code": h.exit_code, "outcome": h.outcome}
            for h in first.hooks
            if h.matched
        ],
    }
