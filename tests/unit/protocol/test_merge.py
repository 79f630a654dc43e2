"""Every merge rule of spec section 6, the tier short-circuit, and the decision records."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from cloudrunner.protocol.loops import InMemoryLoopCounterStore
from cloudrunner.protocol.merge import merge, run_tiers
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.plan import build_plan
from cloudrunner.protocol.planned_hook import PlannedHook
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.protocol.results import Execution, ExecutionStatus
from tests.unit.protocol.helpers import exit_code, fates, ok, run, source

E, T, P, U = SourceKind.ENTERPRISE, SourceKind.TEAM, SourceKind.PROJECT, SourceKind.USER


def cmds(*names: str) -> list[dict[str, object]]:
    return [{"command": n} for n in names]


# --- permission ----------------------------------------------------------------------------


def test_no_answer_is_allow() -> None:
    _, merged, _ = run([source(P, {"preToolUse": cmds("a")})], "preToolUse", {}, {})
    assert merged.answer == {"permission": "allow"}
    assert merged.blocked_by is None


def test_no_hooks_at_all_is_allow() -> None:
    _, merged, _ = run([], "beforeShellExecution", {}, {})
    assert merged.answer == {"permission": "allow"}


@pytest.mark.parametrize(
    ("answers", "final"),
    [
        (["allow", "ask"], "ask"),
        (["ask", "deny"], "deny"),
        (["allow", "deny", "ask"], "deny"),
        (["allow", "allow"], "allow"),
    ],
)
def test_most_restrictive_permission_wins(answers: list[str], final: str) -> None:
    names = [f"h{i}" for i in range(len(answers))]
    executions = {n: ok({"permission": a}) for n, a in zip(names, answers, strict=True)}
    _, merged, _ = run([source(P, {"preToolUse": cmds(*names)})], "preToolUse", {}, executions)
    assert merged.answer["permission"] == final


def test_messages_come_from_the_winning_decision_highest_priority_first() -> None:
    sources = [
        source(P, {"beforeShellExecution": cmds("p")}),
        source(T, {"beforeShellExecution": cmds("t1", "t2")}),
    ]
    executions = {
        "p": ok({"permission": "ask", "user_message": "p-user", "agent_message": "p-agent"}),
        "t1": ok({"permission": "ask", "user_message": "t1-user"}),
        "t2": ok({"permission": "ask", "user_message": "t2-user", "agent_message": "t2-agent"}),
    }
    _, merged, _ = run(sources, "beforeShellExecution", {"command": "x"}, executions)
    assert merged.answer == {"permission": "ask", "user_message": "t1-user"}
    assert fates(merged, "t1") == {"permission": "used", "user_message": "used"}
    assert fates(merged, "t2")["user_message"] == "overridden"
    assert fates(merged, "p") == {
        "permission": "overridden", "user_message": "overridden", "agent_message": "overridden",
    }  # fmt: skip


def test_a_lower_priority_deny_beats_a_higher_priority_allow() -> None:
    # different tiers: an allow does not short-circuit, so the project deny is heard
    sources = [source(E, {"preToolUse": cmds("e")}), source(P, {"preToolUse": cmds("p")})]
    executions = {
        "e": ok({"permission": "allow", "user_message": "fine"}),
        "p": ok({"permission": "deny", "agent_message": "no"}),
    }
    _, merged, asked = run(sources, "preToolUse", {}, executions)
    assert asked == ["e", "p"]
    assert merged.answer == {"permission": "deny", "agent_message": "no"}
    assert fates(merged, "e") == {"permission": "overridden", "user_message": "overridden"}


def test_subagent_start_ask_counts_as_deny() -> None:
    src = source(P, {"subagentStart": cmds("a")})
    _, merged, _ = run([src], "subagentStart", {}, {"a": ok({"permission": "ask"})})
    assert merged.answer == {"permission": "deny"}


def test_ask_on_before_read_file_is_invalid_output_and_ignored() -> None:
    src = source(P, {"beforeReadFile": cmds("a")})
    _, merged, _ = run([src], "beforeReadFile", {}, {"a": ok({"permission": "ask"})})
    assert merged.answer == {"permission": "allow"}
    assert merged.decisions[0].result.outcome is Outcome.INVALID_OUTPUT


# --- short-circuit -------------------------------------------------------------------------


def test_a_block_skips_lower_sources_and_records_each_skip() -> None:
    sources = [
        source(E, {"preToolUse": cmds("e")}),
        source(T, {"preToolUse": cmds("t1", "t2")}),
        source(P, {"preToolUse": cmds("p1", "p2")}),
    ]
    executions = {"t1": ok({"permission": "deny", "agent_message": "team says no"})}
    _, merged, asked = run(sources, "preToolUse", {}, executions)
    assert asked == ["e", "t1", "t2"]  # the team tier runs whole; the project tier is skipped
    assert merged.answer == {"permission": "deny", "agent_message": "team says no"}
    assert merged.blocked_by is not None and merged.blocked_by.hook.command == "t1"
    skipped = [d for d in merged.decisions if d.result.outcome is Outcome.SKIPPED]
    assert [d.result.hook.command for d in skipped] == ["p1", "p2"]
    assert all("blocked the action in a higher-priority source" in d.summary for d in skipped)


def test_exit_2_blocks_and_short_circuits() -> None:
    sources = [
        source(T, {"beforeShellExecution": cmds("t")}),
        source(P, {"beforeShellExecution": cmds("p")}),
    ]
    _, merged, asked = run(sources, "beforeShellExecution", {}, {"t": exit_code(2, stderr="nope")})
    assert asked == ["t"]
    assert merged.answer == {"permission": "deny", "agent_message": "nope"}


def test_fail_open_failure_does_not_short_circuit() -> None:
    sources = [source(T, {"preToolUse": cmds("t")}), source(P, {"preToolUse": cmds("p")})]
    _, merged, asked = run(sources, "preToolUse", {}, {"t": exit_code(1)})
    assert asked == ["t", "p"]
    assert merged.answer == {"permission": "allow"}
    assert "fail-open" in merged.decisions[0].summary


def test_fail_closed_failure_blocks_and_short_circuits() -> None:
    sources = [
        source(T, {"preToolUse": [{"command": "t", "failClosed": True}]}),
        source(P, {"preToolUse": cmds("p")}),
    ]
    timeout = Execution(ExecutionStatus.TIMEOUT)
    _, merged, asked = run(sources, "preToolUse", {}, {"t": timeout})
    assert asked == ["t"]
    assert merged.answer["permission"] == "deny"
    assert "timeout" in merged.answer["agent_message"]
    assert "failClosed" in merged.decisions[0].summary


def test_broken_fail_closed_matcher_blocks_its_event_and_lower_tiers() -> None:
    sources = [
        source(E, {"beforeShellExecution": [{"command": "e", "matcher": "(", "failClosed": True}]}),
        source(P, {"beforeShellExecution": cmds("p")}),
    ]
    _, merged, asked = run(sources, "beforeShellExecution", {"command": "ls"}, {})
    assert asked == []
    assert merged.answer["permission"] == "deny"
    assert "invalid matcher" in merged.answer["agent_message"]


def test_non_blocking_events_never_short_circuit() -> None:
    sources = [source(T, {"afterFileEdit": cmds("t")}), source(P, {"afterFileEdit": cmds("p")})]
    _, merged, asked = run(sources, "afterFileEdit", {}, {"t": exit_code(2)})
    assert asked == ["t", "p"]
    assert merged.answer == {}
    assert merged.blocked_by is None


# --- updated_input, continue ---------------------------------------------------------------


def test_updated_input_from_the_highest_priority_hook() -> None:
    sources = [source(T, {"preToolUse": cmds("t")}), source(P, {"preToolUse": cmds("p")})]
    executions = {
        "t": ok({"updated_input": {"command": "npm ci"}}),
        "p": ok({"permission": "allow", "updated_input": {"command": "other"}}),
    }
    _, merged, _ = run(sources, "preToolUse", {}, executions)
    assert merged.answer == {"permission": "allow", "updated_input": {"command": "npm ci"}}
    assert fates(merged, "t")["updated_input"] == "used"
    assert fates(merged, "p")["updated_input"] == "overridden"


def test_updated_input_is_dropped_when_the_final_permission_is_deny() -> None:
    src = source(P, {"preToolUse": cmds("a", "b")})
    executions = {"a": ok({"updated_input": {"x": 1}}), "b": ok({"permission": "deny"})}
    _, merged, _ = run([src], "preToolUse", {}, executions)
    assert merged.answer == {"permission": "deny"}
    assert fates(merged, "a")["updated_input"] == "dropped"


def test_updated_input_applies_with_ask() -> None:
    src = source(P, {"preToolUse": cmds("a")})
    execs = {"a": ok({"permission": "ask", "updated_input": {"x": 1}})}
    _, merged, _ = run([src], "preToolUse", {}, execs)
    assert merged.answer == {"permission": "ask", "updated_input": {"x": 1}}


def test_continue_is_false_if_any_hook_says_false() -> None:
    src = source(P, {"beforeSubmitPrompt": cmds("a", "b", "c")})
    executions = {
        "a": ok({"continue": True, "user_message": "fine"}),
        "b": ok({"continue": False, "user_message": "secret"}),
        "c": ok({"continue": False, "user_message": "also"}),
    }
    _, merged, _ = run([src], "beforeSubmitPrompt", {}, executions)
    assert merged.answer == {"continue": False, "user_message": "secret"}
    assert merged.blocked_by is not None and merged.blocked_by.hook.command == "b"


def test_continue_defaults_to_true() -> None:
    src = source(P, {"beforeSubmitPrompt": cmds("a")})
    _, merged, _ = run([src], "beforeSubmitPrompt", {}, {})
    assert merged.answer == {"continue": True}


# --- follow-ups and loop_limit -------------------------------------------------------------


def test_followup_first_in_priority_order_and_counted_per_script() -> None:
    loops = InMemoryLoopCounterStore()
    sources = [
        source(T, {"stop": [{"command": "t", "loop_limit": 1}]}),
        source(P, {"stop": cmds("p")}),
    ]
    execs = {"t": ok({"followup_message": "from t"}), "p": ok({"followup_message": "from p"})}
    payload = {"conversation_id": "c1", "status": "completed"}
    answers = [run(sources, "stop", payload, execs, loops=loops)[1] for _ in range(3)]
    assert [a.answer for a in answers] == [
        {"followup_message": "from t"},
        {"followup_message": "from p"},  # t is over its budget of 1: the next one in order
        {"followup_message": "from p"},
    ]
    assert fates(answers[0], "p") == {"followup_message": "overridden"}
    assert fates(answers[1], "t") == {"followup_message": "dropped"}
    reason = next(
        f.reason for d in answers[1].decisions for f in d.fields if d.result.hook.command == "t"
    )
    assert "over loop_limit" in reason


def test_default_loop_limit_is_5_per_conversation() -> None:
    loops = InMemoryLoopCounterStore()
    src = source(P, {"stop": cmds("a")})
    execs = {"a": ok({"followup_message": "again"})}
    got = [
        run([src], "stop", {"conversation_id": "c"}, execs, loops=loops)[1].answer for _ in range(7)
    ]
    assert got == [{"followup_message": "again"}] * 5 + [{}] * 2
    other = run([src], "stop", {"conversation_id": "d"}, execs, loops=loops)[1].answer
    assert other == {"followup_message": "again"}  # another conversation has its own budget


def test_null_loop_limit_is_unlimited_and_zero_is_none() -> None:
    loops = InMemoryLoopCounterStore()
    unlimited = source(P, {"stop": [{"command": "u", "loop_limit": None}]})
    execs = {"u": ok({"followup_message": "go"}), "z": ok({"followup_message": "go"})}
    for _ in range(20):
        assert run([unlimited], "stop", {}, execs, loops=loops)[1].answer == {
            "followup_message": "go"
        }
    zero = source(P, {"stop": [{"command": "z", "loop_limit": 0}]})
    assert run([zero], "stop", {}, execs, loops=loops)[1].answer == {}


@pytest.mark.parametrize(
    ("status", "used"), [("completed", True), ("error", False), ("aborted", False)]
)
def test_subagent_stop_followup_only_when_completed(status: str, used: bool) -> None:
    loops = InMemoryLoopCounterStore()
    src = source(P, {"subagentStop": cmds("a")})
    _, merged, _ = run(
        [src],
        "subagentStop",
        {"status": status},
        {"a": ok({"followup_message": "next"})},
        loops=loops,
    )
    assert merged.answer == ({"followup_message": "next"} if used else {})
    assert loops.used("", build_plan([src], "subagentStop", {}).hooks_to_run[0].script_key) == int(
        used
    )


def test_empty_followup_is_not_used() -> None:
    src = source(P, {"stop": cmds("a", "b")})
    execs = {"a": ok({"followup_message": "  "}), "b": ok({"followup_message": "real"})}
    assert run([src], "stop", {}, execs)[1].answer == {"followup_message": "real"}


# --- context, mcp output, preCompact, env, pluginPaths ------------------------------------


def test_additional_context_joins_all_non_empty_in_priority_order() -> None:
    sources = [source(P, {"postToolUse": cmds("p")}), source(E, {"postToolUse": cmds("e1", "e2")})]
    execs = {
        "p": ok({"additional_context": "third"}),
        "e1": ok({"additional_context": "first"}),
        "e2": ok({"additional_context": ""}),
    }
    _, merged, _ = run(sources, "postToolUse", {}, execs)
    assert merged.answer == {"additional_context": "first\n\nthird"}


def test_updated_mcp_tool_output_highest_priority_wins() -> None:
    sources = [source(P, {"postToolUse": cmds("p")}), source(T, {"postToolUse": cmds("t")})]
    execs = {
        "p": ok({"updated_mcp_tool_output": "p"}),
        "t": ok({"updated_mcp_tool_output": {"t": 1}}),
    }
    _, merged, _ = run(sources, "postToolUse", {}, execs)
    assert merged.answer == {"updated_mcp_tool_output": {"t": 1}}
    assert fates(merged, "p") == {"updated_mcp_tool_output": "overridden"}


def test_pre_compact_user_message_highest_priority_wins() -> None:
    sources = [source(P, {"preCompact": cmds("p")}), source(E, {"preCompact": cmds("e")})]
    execs = {"p": ok({"user_message": "p"}), "e": ok({"user_message": "e"})}
    assert run(sources, "preCompact", {}, execs)[1].answer == {"user_message": "e"}


def test_env_merges_with_higher_priority_winning_per_key() -> None:
    sources = [source(U, {"sessionStart": cmds("u")}), source(P, {"sessionStart": cmds("p")})]
    execs = {
        "u": ok({"env": {"A": "user", "B": "user"}, "additional_context": "ctx-u"}),
        "p": ok({"env": {"A": "project", "C": "project"}}),
    }
    _, merged, _ = run(sources, "sessionStart", {}, execs, profile=Profile.DESKTOP)
    assert merged.answer == {
        "env": {"A": "project", "C": "project", "B": "user"},
        "additional_context": "ctx-u",
    }
    assert merged.env == {"A": "project", "B": "user", "C": "project"}


def test_plugin_paths_union_in_priority_order_without_duplicates() -> None:
    sources = [source(P, {"workspaceOpen": cmds("p")}), source(E, {"workspaceOpen": cmds("e")})]
    execs = {"p": ok({"pluginPaths": ["/b", "/c", "/b"]}), "e": ok({"pluginPaths": ["/a", "/b"]})}
    _, merged, _ = run(sources, "workspaceOpen", {}, execs, profile=Profile.DESKTOP)
    assert merged.answer == {"pluginPaths": ["/a", "/b", "/c"]}


# --- records -------------------------------------------------------------------------------


def test_unknown_output_fields_are_recorded_as_dropped() -> None:
    src = source(P, {"preToolUse": cmds("a")})
    _, merged, _ = run([src], "preToolUse", {}, {"a": ok({"agentMessage": "typo"})})
    assert fates(merged, "a") == {"agentMessage": "dropped"}


def test_every_result_has_a_decision_in_priority_order() -> None:
    sources = [source(P, {"stop": cmds("p")}), source(E, {"stop": cmds("e1", "e2")})]
    plan = build_plan(sources, "stop", {})

    def run_tier(hooks: Sequence[PlannedHook]) -> list[Execution]:
        return [ok() for _ in hooks]

    results = list(run_tiers(plan, run_tier))
    merged = merge(plan, reversed(results), InMemoryLoopCounterStore())  # any order in
    assert [d.result.hook.command for d in merged.decisions] == ["e1", "e2", "p"]
    record = merged.decisions[0].to_dict()
    assert record["outcome"] == "ok" and record["hook"]["source"] == "enterprise"


def test_run_tiers_checks_the_runner_answers_every_hook() -> None:
    plan = build_plan([source(P, {"stop": cmds("a", "b")})], "stop", {})
    with pytest.raises(ValueError, match="2 hooks"):
        run_tiers(plan, lambda hooks: [ok()])
