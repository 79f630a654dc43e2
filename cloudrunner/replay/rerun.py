"""`cloudrunner replay STREAM --repo URL|PATH [--ref R]`: run an event stream through the
full cloud pipeline and report every answer that differs from the one expected.

The repository is cloned at the stream's commit (or `--ref`, to test a change) into a fresh
state directory, so loop counts and session state start empty as they did when the stream
was recorded; each event then goes through `Worker.handle`, exactly as `cloudrunner run`
would answer it. Paths under the recorded workspace are moved to the replay's workspace;
in hand-written streams `{workspace}` stands for it. The replay's own audit log tells which
hooks ran and how, so a divergence names the hook whose outcome changed.

Exit 0: every answer matched (or `--update` rewrote the expected answers); 1: a divergence;
2: the stream, the repository or the settings are unusable.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudrunner.audit.records import AnyRecord, RecordKind, view
from cloudrunner.errors import CloudrunnerError
from cloudrunner.replay.stream import Stream, StreamEvent, rewrite_stream

HOOK_FIELDS = ("outcome", "merge_use")


class ReplayError(CloudrunnerError):
    """A replay that cannot start: the repository does not match the stream, no --repo."""


@dataclass
class HookChange:
    source: str
    command: str
    index: int | None
    #: field -> (recorded, replayed); a hook only on one side has `ran` changed
    changes: dict[str, tuple[Any, Any]]

    def text(self) -> str:
        parts = [f"{name} {_short(a)} -> {_short(b)}" for name, (a, b) in self.changes.items()]
        return f"{self.source} `{self.command}`: " + ", ".join(parts)


@dataclass
class EventResult:
    number: int
    where: str
    event: str
    name: str | None
    #: match, diverged, ran (nothing expected), refused
    status: str
    expected: dict[str, Any] | None
    got: dict[str, Any] | None
    differences: list[str] = field(default_factory=list)
    hooks: list[HookChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the hooks that ran in the replay, as a recording keeps them (for --update)
    replayed_hooks: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "where": self.where,
            "event": self.event,
            "name": self.name,
            "status": self.status,
            "expected": self.expected,
            "got": self.got,
            "differences": self.differences,
            "hooks": [
                {"source": h.source, "command": h.command, "index": h.index,
                 "changes": {k: list(v) for k, v in h.changes.items()}}
                for h in self.hooks
            ],
            "notes": self.notes,
        }  # fmt: skip


@dataclass
class ReplayReport:
    stream: str
    repo: str
    commit: str | None
    recorded_commit: str | None
    #: replayed against --ref instead of the recorded commit
    ref_given: bool = False
    events: list[EventResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    updated: int = 0

    @property
    def diverged(self) -> list[EventResult]:
        return [e for e in self.events if e.status in ("diverged", "refused")]

    def as_json(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "repo": self.repo,
            "commit": self.commit,
            "recorded_commit": self.recorded_commit,
            "ok": not self.diverged,
            "events": [e.as_json() for e in self.events],
            "diverged": len(self.diverged),
            "updated": self.updated,
            "notes": self.notes,
        }


def _short(value: Any) -> str:
    return "-" if value is None else json.dumps(value, ensure_ascii=False)


#: an answer whose one-line JSON is wider than this is shown one key a line
ANSWER_WIDTH = 70


def answer_lines(label: str, value: Any) -> list[str]:
    """`label` and the answer, as one line, or one key a line when the line would be wider
    than ANSWER_WIDTH (a terminal or a page of 90 columns shows it whole, but for long
    values)."""
    one = _short(value)
    head = f"      {label:9} "
    if len(one) <= ANSWER_WIDTH or not isinstance(value, dict) or len(value) < 2:
        return [head + one]
    items = [
        f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(item, ensure_ascii=False)}"
        for key, item in value.items()
    ]
    pad = " " * len(head)
    lines = [f"{head}{{{items[0]},"]
    lines += [f"{pad} {item}," for item in items[1:-1]]
    lines.append(f"{pad} {items[-1]}}}")
    return lines


# -- comparing ---------------------------------------------------------------------------------


def differences(expected: Mapping[str, Any], got: Mapping[str, Any], match: str) -> list[str]:
    """Answer keys whose values differ (subset: only the keys `expected` names)."""
    keys = set(expected) if match == "subset" else set(expected) | set(got)
    return sorted(key for key in keys if expected.get(key) != got.get(key))


def _hook_key(hook: Mapping[str, Any]) -> tuple[str, str, int | None]:
    index = hook.get("hook_index")
    return (
        str(hook.get("source") or ""),
        str(hook.get("command") or ""),
        index if isinstance(index, int) else None,
    )


def hook_changes(
    recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]
) -> list[HookChange]:
    """Hooks whose outcome or use in the merge changed, and hooks that ran on one side only."""
    before = {_hook_key(h): h for h in recorded}
    after = {_hook_key(h): h for h in replayed}
    out = []
    for key in [*before, *(k for k in after if k not in before)]:
        old, new = before.get(key), after.get(key)
        changes: dict[str, tuple[Any, Any]]
        if old is None or new is None:
            changes = {"ran": (old is not None, new is not None)}
        else:
            changes = {f: (old.get(f), new.get(f)) for f in HOOK_FIELDS if old.get(f) != new.get(f)}
        if changes:
            out.append(HookChange(key[0], key[1], key[2], changes))
    return out


def deciding_hooks(replayed: list[dict[str, Any]]) -> list[HookChange]:
    """For a stream that recorded no hooks: the hooks whose answer the merge used."""
    out = []
    for hook in replayed:
        use = str(hook.get("merge_use") or "")
        if hook.get("outcome") not in ("ok", "skipped") or use.startswith(("decided", "used")):
            key = _hook_key(hook)
            out.append(
                HookChange(key[0], key[1], key[2], {"outcome": (None, hook.get("outcome")),
                                                     "merge_use": (None, use)})
            )  # fmt: skip
    return out


# -- payloads ----------------------------------------------------------------------------------


def _move_paths(value: Any, old: str | None, new: str) -> Any:
    if isinstance(value, str):
        value = value.replace("{workspace}", new)
        if old and (value == old or value.startswith(old.rstrip("/") + "/")):
            return new + value[len(old.rstrip("/")) :] if value != old else new
        return value
    if isinstance(value, dict):
        return {key: _move_paths(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_move_paths(item, old, new) for item in value]
    return value


def replay_payload(event: StreamEvent, stream: Stream, number: int, root: Path) -> bytes:
    """The event's payload as the replay's agent would send it, in the replay's workspace."""
    payload = _move_paths(event.payload, event.workspace, str(root))
    payload["hook_event_name"] = event.event
    payload["workspace_roots"] = [str(root)]
    payload.setdefault("conversation_id", stream.conversation_id or f"replay-{stream.path.stem}")
    payload.setdefault("generation_id", f"replay-{number}")
    return json.dumps(payload).encode("utf-8")


# -- running -----------------------------------------------------------------------------------


class _AuditCursor:
    """The records the replay's own audit log gained since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last_seq = -1

    def new_records(self) -> list[AnyRecord]:
        from cloudrunner.audit.reader import read_logs

        if not self.path.exists():
            return []
        fresh = [
            entry.record
            for entry in read_logs([self.path], lambda _m: None, exact=True)
            if entry.record["seq"] > self.last_seq
        ]
        if fresh:
            self.last_seq = fresh[-1]["seq"]
        return fresh


@contextlib.contextmanager
def _state_dir(given: Path | None) -> Iterator[Path]:
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        yield given
        return
    try:
        made = Path(tempfile.mkdtemp(prefix=".cloudrunner-replay-", dir=Path.cwd()))
    except OSError as exc:
        raise ReplayError(
            f"cannot make a state directory for the replay in {Path.cwd()}: {exc.strerror}; "
            "pass --state-dir DIR"
        ) from None
    # The hooks' unprivileged uid must reach the clone inside it.
    made.chmod(0o755)
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def _commit_of(records: list[AnyRecord]) -> str | None:
    for record in records:
        commit = record.get("commit")
        if isinstance(commit, str) and commit:
            return commit
    return None


def _normalised(answer: dict[str, Any], event: StreamEvent) -> dict[str, Any]:
    """A replayed answer stored as the recording stored the expected one."""
    if not event.recorded:
        return answer
    from cloudrunner.replay.recording import normalise

    stored = normalise({"answer": answer}, include_payload_text=event.payload_text)
    return dict(stored["answer"])


def _replayed_hooks(records: list[AnyRecord]) -> list[dict[str, Any]]:
    from cloudrunner.replay.recording import recorded_hook

    hooks = (view(record, RecordKind.HOOK) for record in records)
    return [recorded_hook(hook) for hook in hooks if hook is not None]


def run_replay(
    stream: Stream, settings_for: Any, *, repo: str, ref: str | None, update: bool,
    state_dir: Path | None,
) -> ReplayReport:  # fmt: skip
    """Replay `stream`; `settings_for(state_dir, ref)` builds the worker settings."""
    from cloudrunner.worker import Worker

    commits = stream.commits()
    if len(commits) > 1 and ref is None:
        raise ReplayError(
            f"{stream.path} holds events recorded at {len(commits)} commits "
            f"({', '.join(c[:12] for c in commits)}); pass --ref to replay them all against "
            "one ref, or split the stream"
        )
    recorded = commits[0] if commits else None
    target = ref if ref is not None else recorded
    report = ReplayReport(str(stream.path), repo, None, recorded, ref_given=ref is not None)
    with _state_dir(state_dir) as state:
        settings = settings_for(state, target)
        root = (settings.workspace.path or state / "workspace").resolve()
        cursor = _AuditCursor(settings.audit_path)
        cursor.new_records()  # a reused audit log: only what this replay adds counts
        with Worker(settings) as worker:
            for number, event in enumerate(stream.events, start=1):
                result = _replay_one(worker, event, stream, number, root, cursor, report)
                report.events.append(result)
                if update and result.got is not None:
                    report.updated += _update(event, result, commit=report.commit)
    _stream_notes(stream, report)
    if update and (report.updated or report.commit != report.recorded_commit):
        rewrite_stream(stream)
    return report


def _replay_one(
    worker: Any, event: StreamEvent, stream: Stream, number: int, root: Path,
    cursor: _AuditCursor, report: ReplayReport,
) -> EventResult:  # fmt: skip
    payload = replay_payload(event, stream, number, root)
    result = EventResult(number, event.where, event.event, event.name, "ran", event.expected, None)
    try:
        reply = worker.handle(payload, event.event)
    except CloudrunnerError as exc:
        cursor.new_records()
        if report.commit is None and _runs(worker, event) and not (root / ".git").exists():
            target = report.recorded_commit or "the default branch"
            raise ReplayError(
                f"the repository {report.repo} does not match the stream {stream.path}: "
                f"cannot check out {target}: {exc.message}; replay against a repository "
                "holding that commit, or pass --ref to test another one"
            ) from None
        result.status = "refused"
        result.notes.append(f"refused: {exc.message}")
        if event.altered:
            result.notes.append(
                "the recorded payload was digested or redacted at " + ", ".join(event.altered)
                + " (record with audit.record_payload_text = true to replay payload text)"
            )  # fmt: skip
        return result
    records = cursor.new_records()
    commit = _commit_of(records)
    if report.commit is None and commit is not None:
        report.commit = commit
        wanted = report.recorded_commit
        if wanted and not report.ref_given and not commit.startswith(wanted):
            raise ReplayError(
                f"the repository {report.repo} checked out {commit[:12]}, not the stream's "
                f"commit {wanted[:12]}: they do not match; pass --ref to replay another commit"
            )
    got = _normalised(reply.answer, event)
    result.got = got
    replayed = _replayed_hooks(records)
    result.replayed_hooks = replayed
    if reply.gated:
        result.notes.append("gated: the writability gate was closed, no hook ran")
    if event.expected is None:
        return result
    result.differences = differences(event.expected, got, event.match)
    result.status = "diverged" if result.differences else "match"
    if result.differences:
        if event.recorded:
            result.hooks = hook_changes(event.hooks, replayed)
        if not result.hooks:
            result.hooks = deciding_hooks(replayed)
        if not result.hooks:
            ran = sum(1 for hook in replayed if hook.get("outcome") != "skipped")
            result.notes.append(f"no hook decided this answer ({ran} hook(s) ran for it)")
        if event.altered:
            result.notes.append(
                "the recorded payload was digested or redacted at "
                + ", ".join(event.altered)
                + ", so the hooks saw other input than when it was recorded"
            )
    return result


def _runs(worker: Any, event: StreamEvent) -> bool:
    """Does the worker's profile run this event (so a failure is the checkout's)?"""
    from cloudrunner.protocol.events import event_spec

    return bool(worker.profile.runs_event(event_spec(event.event).in_cloud))


def _update(event: StreamEvent, result: EventResult, *, commit: str | None) -> int:
    """Take the replayed answer (and, for a recorded entry, the commit and hooks it was
    replayed with, so the stream stays one commit); 1 when the expected answer changed."""
    assert result.got is not None
    if event.recorded:
        event.data["hooks"] = result.replayed_hooks
        if commit is not None:
            event.data["commit"] = commit
    if result.status == "match":
        return 0
    event.data["expected"] = result.got
    event.expected = result.got
    return 1


def _stream_notes(stream: Stream, report: ReplayReport) -> None:
    if report.recorded_commit and report.commit and report.commit != report.recorded_commit:
        report.notes.append(
            f"replayed at {report.commit[:12]}, recorded at {report.recorded_commit[:12]}"
        )


# -- the command -------------------------------------------------------------------------------


def render_text(report: ReplayReport) -> str:
    out = [
        f"replay {report.stream} against {report.repo} at "
        f"{report.commit[:12] if report.commit else '?'}"
    ]
    for event in report.events:
        title = event.name or event.where
        out.append(f"  {event.status.upper() if event.status != 'match' else 'ok':9} "
                   f"#{event.number} {event.event}: {title}")  # fmt: skip
        if event.status in ("diverged", "refused"):
            for hook in event.hooks:
                out.append(f"      hook      {hook.text()}")
            if event.expected is not None:
                out += answer_lines("expected", event.expected)
            out += answer_lines("got", event.got)
            if event.differences:
                out.append(f"      differs   {', '.join(event.differences)}")
        out += [f"      note      {note}" for note in event.notes]
    out += [f"note: {note}" for note in report.notes]
    total = len(report.events)
    matched = sum(1 for e in report.events if e.status == "match")
    ran = sum(1 for e in report.events if e.status == "ran")
    summary = f"replay: {total} events, {matched} match, {len(report.diverged)} diverged"
    if ran:
        summary += f", {ran} with nothing expected"
    if report.updated:
        summary += f"; updated {report.updated} expected answer(s) in {report.stream}"
    out.append(summary)
    return "\n".join(out)
