from __future__ import annotations

import json

import pytest

from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.plan import DEFAULT_TIMEOUT_SECONDS, build_plan
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.protocol.protocol_errors import EventNotAvailable, InvalidPayload, UnknownEvent
from tests.unit.protocol.helpers import source

E, T, P, U = SourceKind.ENTERPRISE, SourceKind.TEAM, SourceKind.PROJECT, SourceKind.USER


def test_tiers_follow_source_priority_and_file_order() -> None:
    sources = [
        source(P, {"stop": [{"command": "p1"}, {"command": "p2"}]}),
        source(E, {"stop": [{"command": "e1"}]}),
        source(T, {"stop": [{"command": "t1"}, {"command": "t2"}]}),
    ]
    plan = build_plan(sources, "stop", {"status": "completed"})
    assert [t.source_kind for t in plan.tiers] == [E, T, P]
    assert [[h.command for h in t.hooks] for t in plan.tiers] == [
        ["e1"],
        ["t1", "t2"],
        ["p1", "p2"],
    ]
    assert [h.index for h in plan.tiers[2].hooks] == [0, 1]


def test_sources_without_hooks_for_the_event_make_no_tier() -> None:
    sources = [
        source(E, {"preToolUse": [{"command": "e"}]}),
        source(P, {"stop": [{"command": "p"}]}),
    ]
    plan = build_plan(sources, "stop", {})
    assert [t.source_kind for t in plan.tiers] == [P]


def test_planned_hook_carries_what_the_runner_needs() -> None:
    src = source(P, {"stop": [{"command": "a", "timeout": 7, "failClosed": True, "loop_limit": 2}]})
    hook = build_plan([src], "stop", {}).hooks_to_run[0]
    assert hook.source_kind is P and hook.source_priority == 2
    assert hook.source_path == src.path and hook.working_dir == src.working_dir
    assert hook.source_sha256 == "0" * 64
    assert (hook.timeout, hook.fail_closed, hook.loop_limit) == (7, True, 2)
    assert hook.entry.pointer == "/hooks/stop/0"
    assert hook.hook_id == f"project:{src.path}#/hooks/stop/0"
    assert hook.to_dict()["command"] == "a"


def test_default_timeout_applies_and_is_configurable() -> None:
    src = source(P, {"stop": [{"command": "a"}]})
    assert build_plan([src], "stop", {}).hooks_to_run[0].timeout == DEFAULT_TIMEOUT_SECONDS == 60
    assert build_plan([src], "stop", {}, default_timeout=5).hooks_to_run[0].timeout == 5


def test_identical_definitions_in_one_source_run_once() -> None:
    src = source(P, {"stop": [{"command": "a"}, {"command": "b"}, {"command": "a"}]})
    other = source(E, {"stop": [{"command": "a"}]})
    plan = build_plan([src, other], "stop", {})
    assert [h.command for h in plan.hooks_to_run] == ["a", "a", "b"]  # enterprise a, project a, b
    (dup,) = plan.resolved
    assert dup.outcome is Outcome.SKIPPED
    assert dup.hook.index == 2 and "run once" in dup.reason


def test_not_matching_hooks_are_listed_not_run() -> None:
    src = source(
        P,
        {"preToolUse": [{"command": "s", "matcher": "Shell"}, {"command": "r", "matcher": "Read"}]},
    )
    plan = build_plan([src], "preToolUse", {"tool_name": "Read"})
    assert [h.command for h in plan.hooks_to_run] == ["r"]
    (skipped,) = plan.tiers[0].not_matched
    assert skipped.command == "s" and "does not match 'Read'" in skipped.match.reason


def test_invalid_matcher_never_runs_and_blocks_only_when_fail_closed() -> None:
    src = source(
        P,
        {
            "beforeShellExecution": [
                {"command": "open", "matcher": "("},
                {"command": "closed", "matcher": "[", "failClosed": True},
            ]
        },
    )
    plan = build_plan([src], "beforeShellExecution", {"command": "ls"})
    assert plan.hooks_to_run == ()
    open_, closed = plan.resolved
    assert open_.outcome is closed.outcome is Outcome.SKIPPED
    assert not open_.blocks and open_.output == {}
    assert closed.blocks and closed.fail_closed_block
    assert closed.output["permission"] == "deny"
    assert "closed" in closed.output["agent_message"]


def test_invalid_fail_closed_matcher_does_not_block_an_event_without_decision() -> None:
    src = source(P, {"afterShellExecution": [{"command": "x", "matcher": "(", "failClosed": True}]})
    (result,) = build_plan([src], "afterShellExecution", {}).resolved
    assert not result.blocks and result.output == {}


def test_prompt_hooks_are_skipped_in_the_desktop_plan() -> None:
    src = source(U, {"stop": [{"type": "prompt", "prompt": "ok?"}, {"command": "c"}]})
    plan = build_plan([src], "stop", {}, profile=Profile.DESKTOP)
    assert [h.command for h in plan.hooks_to_run] == ["c"]
    assert "prompt hooks are not executable" in plan.resolved[0].reason


@pytest.mark.parametrize(
    "event",
    ["sessionStart", "sessionEnd", "beforeMCPExecution", "afterMCPExecution",
     "beforeTabFileRead", "afterTabFileEdit", "workspaceOpen"],
)  # fmt: skip
def test_non_cloud_events_are_refused_in_cloud_with_the_reason(event: str) -> None:
    with pytest.raises(EventNotAvailable) as info:
        build_plan([], event, {})
    assert info.value.event == event
    assert info.value.reason and info.value.reason in str(info.value)
    assert isinstance(info.value, CloudrunnerError)
    # the desktop profile plans them
    assert build_plan([], event, {}, profile=Profile.DESKTOP).tiers == ()


def test_unknown_event() -> None:
    with pytest.raises(UnknownEvent):
        build_plan([], "onStop", {})


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        (b"{", "not JSON"),
        (b"\xff", "not UTF-8"),
        (b"[]", "must be a JSON object"),
        (b'{"tool_name": 5}', "tool_name"),
        (b'{"workspace_roots": "/a"}', "workspace_roots"),
        (b'{"hook_event_name": "stop"}', "hook_event_name"),
        ({"x": float("nan")}, "cannot be written as JSON"),
        ({"x": object()}, "cannot be written as JSON"),
    ],
)
def test_invalid_payloads(payload: bytes | dict[str, object], words: str) -> None:
    with pytest.raises(InvalidPayload, match=words):
        build_plan([], "preToolUse", payload)


def test_payload_bytes_are_passed_unchanged_and_extras_kept() -> None:
    raw = b'{"tool_name":"Shell",  "future": {"x": 1}, "conversation_id": "c"}'
    plan = build_plan([], "preToolUse", raw)
    assert plan.payload_bytes == raw
    assert plan.payload.model_extra == {"future": {"x": 1}}
    assert plan.conversation_id == "c"
    from_dict = build_plan([], "preToolUse", {"tool_name": "Shell"})
    assert json.loads(from_dict.payload_bytes) == {"tool_name": "Shell"}
