"""Comparing one event's answers, hook exits and side effects, and naming why they differ.

Pure functions over what the runner collected; no processes, no Docker.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_NOT_FOUND = (
    re.compile(r"(?:^|\s|/)(?:sh|bash|env)(?:: \d+)?: ([\w.+-]+): (?:command )?not found"),
    re.compile(r"\benv: '?([\w.+-]+)'?: No such file or directory"),
    re.compile(r"\b([\w.+-]+): command not found"),
)


def normalize(
    answer: Mapping[str, Any] | None, keys: Sequence[str] | None = None
) -> dict[str, Any]:
    """An answer as the protocol means it: a missing `permission` means allow, so an explicit
    allow is dropped; with `keys`, only those keys (`compare` of a case)."""
    out = dict(answer or {})
    if out.get("permission") == "allow":
        del out["permission"]
    if keys is not None:
        out = {k: out[k] for k in keys if k in out}
        if "permission" in keys and "permission" not in out:
            out["permission"] = "allow"
    return out


def same_answer(
    got: Mapping[str, Any] | None, expected: Mapping[str, Any], keys: Sequence[str] | None
) -> bool:
    return got is not None and normalize(got, keys) == normalize(expected, keys)


@dataclass(frozen=True)
class HookExit:
    """One hook of an event as a comparison sees it."""

    index: int
    matched: bool
    exit_code: int | None
    outcome: str | None = None
    stderr: str = ""
    reason: str = ""


def expected_exits(hooks: Iterable[Mapping[str, Any]]) -> list[HookExit]:
    return [
        HookExit(
            int(h["index"]),
            bool(h.get("matched")),
            h.get("exit_code"),
            h.get("outcome"),
            str(h.get("stderr") or ""),
        )
        for h in hooks
    ]


@dataclass(frozen=True)
class ExitComparison:
    #: hook runs (matched hooks of the recording) whose exit code is the same
    same: int
    #: hook runs of the recording
    total: int
    #: indexes whose exit differs, or that ran on one side only
    differing: tuple[int, ...]

    @property
    def all_same(self) -> bool:
        return not self.differing


def compare_exits(expected: Sequence[HookExit], got: Sequence[HookExit]) -> ExitComparison:
    ran_expected = {h.index: h for h in expected if h.matched}
    ran_got = {h.index: h for h in got if h.matched and h.outcome != "skipped"}
    same = sum(
        1 for i, h in ran_expected.items() if i in ran_got and ran_got[i].exit_code == h.exit_code
    )
    differing = sorted(
        i
        for i in set(ran_expected) | set(ran_got)
        if i not in ran_expected
        or i not in ran_got
        or ran_got[i].exit_code != ran_expected[i].exit_code
    )
    return ExitComparison(same, len(ran_expected), tuple(differing))


def missing_tool(text: str) -> str | None:
    """The program a shell could not find, from a stderr text."""
    for pattern in _NOT_FOUND:
        found = pattern.search(text)
        if found:
            return found.group(1)
    return None


def causes_of(hook: HookExit, root: str) -> list[str]:
    """Why a hook in the sandbox may have behaved differently, from its record."""
    text = f"{hook.stderr}\n{hook.reason}"
    lower = text.lower()
    out = []
    if "dubious ownership" in lower or "safe.directory" in lower:
        out.append("git: dubious ownership (workspace owner is not the hook uid)")
    elif "not a git repository" in lower:
        out.append("git: no repository seen (dubious ownership hidden by the hook)")
    tool = missing_tool(text)
    if tool:
        out.append(f"missing tool in the image: {tool}")
    elif hook.exit_code == 127:
        out.append("exit 127: a program is missing in the image")
    if "read-only file system" in lower or "erofs" in lower:
        out.append("read-only path in the sandbox (HOME or outside the workspace)")
    if "permission denied" in lower or "eacces" in lower or "eperm" in lower:
        where = "the workspace" if root and root in text else "a path"
        out.append(f"permission denied on {where} (not writable by the hook uid)")
    if hook.outcome == "timeout":
        out.append("timeout in the sandbox")
    if hook.outcome == "sandbox_error":
        out.append(f"sandbox error: {hook.reason}")
    if hook.outcome == "oom":
        out.append("out of memory in the sandbox")
    if hook.outcome == "output_overflow":
        out.append("output over the sandbox's cap")
    return out


@dataclass(frozen=True)
class WorkspaceFacts:
    """What the host says about the workspace the sandboxed hooks acted on."""

    owner_uid: int
    mode: int
    #: the uid the hooks ran as (the audit records' attestation), None when none ran
    hook_uid: int | None
    #: whether that uid can write the workspace root (checked as that uid on the host)
    writable: bool | None

    def describe(self) -> str:
        return (
            f"the workspace (owner uid {self.owner_uid}, mode {self.mode:04o}) is not "
            f"writable by the hook uid {self.hook_uid}"
        )


@dataclass
class Verdict:
    """Everything the table and the JSON say about one event."""

    repo: str
    event_id: str
    event: str
    answer_same: bool | None = None
    exits: ExitComparison | None = None
    #: None when the event has no `post`
    post_same: bool | None = None
    bare_answer_same: bool | None = None
    bare_exits: ExitComparison | None = None
    bare_post_same: bool | None = None
    ratio: float | None = None
    client_ms: list[float] = field(default_factory=list)
    bare_ms: list[float] = field(default_factory=list)
    first_client_ms: float | None = None
    #: per timed repeat, the hooks' own time in the sandbox (the daemon's duration_ms)
    sandbox_hook_ms: list[float] = field(default_factory=list)
    single_node_hook: bool = False
    causes: list[str] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def all_same(self) -> bool:
        return bool(
            self.answer_same
            and self.exits is not None
            and self.exits.all_same
            and self.post_same is not False
        )

    @property
    def bare_confirms(self) -> bool:
        return bool(
            self.bare_answer_same
            and self.bare_exits is not None
            and self.bare_exits.all_same
            and self.bare_post_same is not False
        )


def explain(
    verdict: Verdict,
    sandbox_hooks: Sequence[HookExit],
    root: str,
    extra: Sequence[str] = (),
    facts: WorkspaceFacts | None = None,
) -> list[str]:
    """The causes of an event's differences, most specific first; [] when nothing differs."""
    if verdict.all_same and verdict.bare_confirms:
        return []
    causes: list[str] = list(extra)
    if not verdict.bare_confirms:
        causes.append("bare on this host differs from the recording (host, not cloudrunner)")
    differing = set(verdict.exits.differing) if verdict.exits else set()
    for hook in sandbox_hooks:
        if hook.matched and (hook.index in differing or not verdict.all_same):
            causes.extend(causes_of(hook, root))
    if verdict.all_same:
        return list(dict.fromkeys(causes))
    if not causes or causes == [
        "bare on this host differs from the recording (host, not cloudrunner)"
    ]:
        if verdict.post_same is False and facts is not None and facts.writable is False:
            causes.append(f"side effect missing: {facts.describe()}")
        elif verdict.post_same is False:
            causes.append("side effect missing: no record says why (see the JSON for stderr)")
        else:
            causes.append("unexplained: no record names a cause (see the JSON for stderr)")
    return list(dict.fromkeys(causes))


def ratio(client_ms: Sequence[float], bare_ms: Sequence[float]) -> float | None:
    """median(client) / median(bare); None when either is empty or bare took no time."""
    if not client_ms or not bare_ms:
        return None
    bare = statistics.median(bare_ms)
    if bare <= 0:
        return None
    return statistics.median(client_ms) / bare


def launcher(command: str) -> str:
    """The program a hook command starts (`node x.mjs` -> node, `bash -c "..."` -> bash)."""
    words = command.strip().split()
    if not words:
        return ""
    first = words[0].rsplit("/", 1)[-1]
    if first == "env" and len(words) > 1:
        return words[1].rsplit("/", 1)[-1]
    return first


def is_single_node_hook(expected_hooks: Iterable[Mapping[str, Any]]) -> bool:
    ran = [h for h in expected_hooks if h.get("matched")]
    return len(ran) == 1 and launcher(str(ran[0].get("command") or "")) == "node"
