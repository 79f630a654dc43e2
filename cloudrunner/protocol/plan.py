"""The plan of one event (spec sections 4 and 6): which hooks run, in which tiers.

Tiers follow source priority (enterprise, team, project, user); within a tier hooks keep
file order and run concurrently. Hooks that are decided without running are resolved here
as skipped results: an identical definition already planned in the same list (run once), a
prompt hook (cloudrunner cannot run those), and an invalid matcher (never runs; a
failClosed one blocks every event of its type), and a matcher whose search went over its
time budget (outcome match_timeout: a failure, so a block when failClosed). Hooks whose
matcher does not match are listed separately, so the audit can say why they did not run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from pydantic import ValidationError

from cloudrunner.protocol.claude_mapping import claude_match
from cloudrunner.protocol.config import HookEntry
from cloudrunner.protocol.events import EventInput, EventSpec, event_spec
from cloudrunner.protocol.matchers import DEFAULT_MATCH_TIMEOUT_S, match
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.planned_hook import PlannedHook
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.protocol.protocol_errors import EventNotAvailable, InvalidPayload
from cloudrunner.protocol.results import HookResult, block_answer, skipped

#: the timeout of a hook that does not give one (spec section 1 Decision; configurable)
DEFAULT_TIMEOUT_SECONDS = 60.0


class HookSource(Protocol):
    """What the plan needs of a loaded source (`cloudrunner.sources.LoadedSource` is one)."""

    @property
    def kind(self) -> SourceKind: ...
    @property
    def path(self) -> Path | None: ...
    @property
    def working_dir(self) -> Path | None: ...
    @property
    def sha256(self) -> str | None: ...
    @property
    def hooks(self) -> Mapping[str, tuple[HookEntry, ...]]: ...


@dataclass(frozen=True)
class Tier:
    source_kind: SourceKind
    source_path: Path
    #: to run, concurrently, in file order
    hooks: tuple[PlannedHook, ...]
    #: decided without running (skipped; an invalid failClosed matcher is a block)
    resolved: tuple[HookResult, ...]
    #: matcher did not match: not run, not part of the merge
    not_matched: tuple[PlannedHook, ...]

    @property
    def priority(self) -> int:
        return self.source_kind.priority


@dataclass(frozen=True)
class Plan:
    event: EventSpec
    payload: EventInput
    #: what the hooks get on stdin: the bytes the worker was given, unchanged
    payload_bytes: bytes
    #: "" when the payload has none (loop budgets are then shared by such payloads)
    conversation_id: str
    tiers: tuple[Tier, ...]

    @property
    def hooks_to_run(self) -> tuple[PlannedHook, ...]:
        return tuple(h for t in self.tiers for h in t.hooks)

    @property
    def resolved(self) -> tuple[HookResult, ...]:
        return tuple(r for t in self.tiers for r in t.resolved)


class DecodedPayload(NamedTuple):
    """A payload its reader already decoded: the document and the bytes it came from (the
    bytes hooks get), so it is not parsed a second time."""

    document: dict[str, Any]
    raw: bytes


def parse_payload(
    spec: EventSpec, payload: bytes | Mapping[str, Any] | DecodedPayload
) -> tuple[EventInput, bytes]:
    """Validate an event payload; returns the model and the bytes to give the hooks.

    Raises `InvalidPayload` for anything that is not a JSON object valid for the event.
    """
    document: Any
    if isinstance(payload, DecodedPayload):
        document, raw = payload
    elif isinstance(payload, bytes | bytearray | memoryview):
        raw = bytes(payload)
        try:
            document = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InvalidPayload(
                spec.name, f"not UTF-8 (invalid byte at offset {exc.start})"
            ) from None
        except json.JSONDecodeError as exc:
            raise InvalidPayload(
                spec.name, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        except (ValueError, RecursionError) as exc:
            raise InvalidPayload(spec.name, f"not usable JSON ({exc})") from None
    elif isinstance(payload, Mapping):
        document = dict(payload)
        try:
            raw = json.dumps(document, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidPayload(spec.name, f"cannot be written as JSON ({exc})") from None
    else:  # the type says Mapping, but a caller may pass whatever its JSON decoder made
        document = payload
    if not isinstance(document, dict):
        raise InvalidPayload(spec.name, f"must be a JSON object, not {type(document).__name__}")
    try:
        model = spec.input_model.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(
            f"`{'.'.join(str(p) for p in e['loc'])}`: {e['msg']}" for e in exc.errors()[:5]
        )
        raise InvalidPayload(spec.name, problems) from None
    except RecursionError:
        raise InvalidPayload(spec.name, "nested too deeply") from None
    named = model.hook_event_name
    if named is not None and named != spec.name:
        raise InvalidPayload(spec.name, f"its hook_event_name is {named!r}, not {spec.name!r}")
    return model, raw


def build_plan(
    sources: Iterable[HookSource],
    event: str,
    payload: bytes | Mapping[str, Any] | DecodedPayload,
    *,
    profile: Profile = Profile.CLOUD,
    default_timeout: float = DEFAULT_TIMEOUT_SECONDS,
    matcher_timeout: float = DEFAULT_MATCH_TIMEOUT_S,
) -> Plan:
    """Plan one event. Raises `UnknownEvent`, `EventNotAvailable` or `InvalidPayload`.
    `matcher_timeout`: seconds one matcher may search before it is a match_timeout."""
    spec = event_spec(event)
    if not profile.runs_event(spec.in_cloud):
        raise EventNotAvailable(event, str(profile), spec.not_in_cloud_reason or "")
    model, raw = parse_payload(spec, payload)
    tiers = []
    for source in sorted(sources, key=_rank):
        entries = source.hooks.get(event, ())
        if not entries or source.path is None:
            continue
        tiers.append(_tier(source, entries, spec, model, default_timeout, matcher_timeout))
    return Plan(spec, model, raw, model.conversation_id or "", tuple(tiers))


def _rank(source: HookSource) -> int:
    """A source's place in the priority order: its kind's, or a Claude file's (below all
    four of Cursor's)."""
    rank = getattr(source, "rank", None)
    return rank if isinstance(rank, int) else source.kind.priority


def _tier(
    source: HookSource,
    entries: tuple[HookEntry, ...],
    spec: EventSpec,
    payload: EventInput,
    default_timeout: float,
    matcher_timeout: float = DEFAULT_MATCH_TIMEOUT_S,
) -> Tier:
    assert source.path is not None
    path = source.path
    working_dir = source.working_dir or path.parent
    run: list[PlannedHook] = []
    resolved: list[HookResult] = []
    not_matched: list[PlannedHook] = []
    first_of: dict[str, HookEntry] = {}
    for entry in entries:
        d = entry.definition
        hook = PlannedHook(
            source_kind=source.kind,
            source_path=path,
            source_sha256=source.sha256 or "",
            working_dir=working_dir,
            entry=entry,
            command=(d.command or "") if d.type == "command" else "",
            timeout=d.timeout if d.timeout is not None else default_timeout,
            fail_closed=d.fail_closed,
            loop_limit=d.loop_limit,
            match=(
                match(entry.matcher, spec, payload, timeout_s=matcher_timeout)
                if entry.claude is None
                else claude_match(entry, spec, payload, timeout_s=matcher_timeout)
            ),
            rank=_rank(source),
        )
        original = first_of.setdefault(entry.canonical, entry)
        if original is not entry:
            resolved.append(
                skipped(hook, f"identical to {original.pointer} in the same file: run once")
            )
        elif d.type == "prompt":
            resolved.append(
                skipped(hook, "prompt hooks are not executable by cloudrunner (no LLM to ask)")
            )
        elif not entry.matcher.valid:
            resolved.append(_broken_matcher(hook, spec))
        elif hook.match.timed_out:
            resolved.append(_timed_out_matcher(hook, spec))
        elif hook.match.matched:
            run.append(hook)
        else:
            not_matched.append(hook)
    return Tier(source.kind, path, tuple(run), tuple(resolved), tuple(not_matched))


def _broken_matcher(hook: PlannedHook, spec: EventSpec) -> HookResult:
    reason = hook.match.reason
    if hook.fail_closed and spec.can_block:
        message = (
            f"blocked: the failClosed hook {hook.describe()} has an {reason}; "
            "fix the matcher in its hooks file"
        )
        return HookResult(
            hook, Outcome.SKIPPED, block_answer(spec, message),
            f"{reason}: never runs, and blocks because it is failClosed",
            fail_closed_block=True,
        )  # fmt: skip
    return skipped(hook, f"{reason}: never runs")


def _timed_out_matcher(hook: PlannedHook, spec: EventSpec) -> HookResult:
    """Neither a match nor a miss: the hook did not run, and a failClosed one blocks."""
    reason = hook.match.reason
    if hook.fail_closed and spec.can_block:
        message = (
            f"blocked: the matcher of the failClosed hook {hook.describe()} ran out of time "
            "(match_timeout); simplify the matcher in its hooks file"
        )
        return HookResult(
            hook, Outcome.MATCH_TIMEOUT, block_answer(spec, message), reason,
            fail_closed_block=True,
        )  # fmt: skip
    return HookResult(hook, Outcome.MATCH_TIMEOUT, {}, reason)
