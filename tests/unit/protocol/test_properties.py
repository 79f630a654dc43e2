"""Bad input, generated: the core raises only its documented error types.

- `parse_hooks_file` never raises (bad files are diagnostics);
- `build_plan` raises only `ProtocolError`s (UnknownEvent, EventNotAvailable, InvalidPayload);
- `classify` and `merge` never raise, whatever the hook printed or exited with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudrunner.protocol.config import parse_hooks_file
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.loops import InMemoryLoopCounterStore
from cloudrunner.protocol.merge import merge, run_tiers
from cloudrunner.protocol.plan import build_plan
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.protocol.protocol_errors import ProtocolError
from cloudrunner.protocol.results import Execution, ExecutionStatus
from tests.unit.protocol.helpers import ParsedSource

KEYS = st.sampled_from(
    ["command", "type", "timeout", "matcher", "loop_limit", "failClosed", "prompt", "model",
     "hooks", "version", "x", "tool_name", "permission", "continue", "env", "pluginPaths",
     "followup_message", "updated_input", "user_message", "agent_message", "status",
     "additional_context", "subagent_type", "hook_event_name", "conversation_id"]
)  # fmt: skip
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(["allow", "deny", "ask", "command", "prompt", "(", "*", "Shell", "completed"])
)
JSON: st.SearchStrategy[Any] = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=25,
)
EVENT_NAMES = st.sampled_from([*EVENTS, "PreToolUse", "nope", ""])


def hook_definition() -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {},
        optional={
            "command": st.text(max_size=10) | JSON,
            "type": st.sampled_from(["command", "prompt", "other"]),
            "timeout": st.integers(-2, 100) | st.floats(0.1, 100) | JSON,
            "matcher": st.sampled_from(["", "*", "(", "Shell", "curl|wget", "[a-"]) | JSON,
            "loop_limit": st.none() | st.integers(-1, 5),
            "failClosed": st.booleans() | JSON,
            "prompt": st.text(max_size=5),
        },
    )


CONFIGS = (
    st.fixed_dictionaries(
        {
            "hooks": st.dictionaries(
                EVENT_NAMES, st.lists(hook_definition(), max_size=3) | JSON, max_size=4
            )
        },
        optional={"version": JSON},
    )
    | JSON
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_parse_never_raises_on_bytes(data: bytes) -> None:
    result = parse_hooks_file(data, file="f")
    assert result.config is not None or result.errors


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(CONFIGS)
def test_parse_never_raises_on_json(document: Any) -> None:
    result = parse_hooks_file(json.dumps(document, indent=1).encode(), file="f")
    for d in result.diagnostics:
        assert d.message
        if d.pointer is not None:
            assert d.pointer == "" or d.pointer.startswith("/")


def _source(document: Any) -> ParsedSource | None:
    parsed = parse_hooks_file(json.dumps(document).encode(), file="/p/hooks.json")
    if parsed.config is None:
        return None
    return ParsedSource(SourceKind.PROJECT, Path("/p/hooks.json"), None, "s", parsed.config.hooks)


STATUSES = st.sampled_from(list(ExecutionStatus))
EXECUTIONS = st.builds(
    Execution,
    STATUSES,
    st.none() | st.integers(-300, 300) | st.sampled_from([0, 2]),
    st.binary(max_size=60) | JSON.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=30),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    CONFIGS,
    EVENT_NAMES,
    JSON | st.binary(max_size=50),
    st.sampled_from(list(Profile)),
    st.lists(EXECUTIONS, min_size=1, max_size=4),
)
def test_plan_classify_merge_raise_only_documented_errors(
    document: Any, event: str, payload: Any, profile: Profile, executions: list[Execution]
) -> None:
    src = _source(document)
    sources = [src] if src is not None else []
    try:
        plan = build_plan(sources, event, payload, profile=profile)
    except ProtocolError as exc:
        assert exc.message
        return
    supply = iter(executions * 10)
    results = run_tiers(plan, lambda hooks: [next(supply) for _ in hooks])
    merged = merge(plan, results, InMemoryLoopCounterStore())
    json.dumps(merged.answer)  # the answer is always printable JSON
    assert len(merged.decisions) == len(results)


@settings(max_examples=200)
@given(st.sampled_from(list(EVENTS)), JSON)
def test_payload_dicts_raise_only_invalid_payload(event: str, payload: Any) -> None:
    if not isinstance(payload, dict):
        payload = {"x": payload}
    try:
        plan = build_plan([], event, payload, profile=Profile.DESKTOP)
    except ProtocolError as exc:
        assert exc.message
        return
    assert plan.tiers == ()
