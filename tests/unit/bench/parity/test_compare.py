"""Comparing answers and exits, and naming the causes of differences."""

from __future__ import annotations

import math

import pytest

from bench.parity.compare import (
    ExitComparison,
    HookExit,
    Verdict,
    WorkspaceFacts,
    causes_of,
    compare_exits,
    explain,
    is_single_node_hook,
    launcher,
    missing_tool,
    normalize,
    ratio,
    same_answer,
)


def test_a_missing_permission_is_an_allow_but_a_deny_is_not() -> None:
    assert same_answer({"permission": "allow"}, {}, None)
    assert same_answer({}, {"permission": "allow"}, None)
    assert not same_answer({"permission": "deny"}, {}, None)
    assert not same_answer({"permission": "ask"}, {"permission": "allow"}, None)
    assert not same_answer(None, {}, None)  # no answer at all never matches


def test_messages_must_match_exactly_unless_the_case_compares_only_some_keys() -> None:
    got = {"permission": "deny", "user_message": "uid 10001 owns nothing"}
    expected = {"permission": "deny", "user_message": "uid 0 owns nothing"}
    assert not same_answer(got, expected, None)
    assert same_answer(got, expected, ("permission",))
    assert not same_answer({"user_message": "x"}, expected, ("permission",))
    assert normalize({"permission": "allow", "x": 1}, ("permission",)) == {"permission": "allow"}


def test_exits_count_the_recorded_hook_runs_and_name_the_differing_ones() -> None:
    expected = [HookExit(0, False, None), HookExit(1, True, 2), HookExit(2, True, 0)]
    got = [HookExit(0, False, None), HookExit(1, True, 0, "ok"), HookExit(2, True, 0, "ok")]
    result = compare_exits(expected, got)
    assert result == ExitComparison(same=1, total=2, differing=(1,))
    assert not result.all_same


def test_a_hook_that_ran_on_one_side_only_differs() -> None:
    expected = [HookExit(0, True, 0)]
    assert compare_exits(expected, []).differing == (0,)
    extra = compare_exits([], [HookExit(3, True, 0, "ok")])
    assert extra.differing == (3,) and extra.total == 0
    # a hook cloudrunner skipped (a higher tier blocked) did not run
    skipped = compare_exits(expected, [HookExit(0, True, None, "skipped")])
    assert skipped.differing == (0,)


@pytest.mark.parametrize(
    ("stderr", "tool"),
    [
        ("/bin/sh: 1: npx: not found", "npx"),
        ("sh: 1: python: not found\n", "python"),
        ("bash: line 3: uv: command not found", "uv"),
        ("/usr/bin/env: 'bun': No such file or directory", "bun"),
        ("all fine", None),
    ],
)
def test_the_missing_program_is_read_from_the_shells_complaint(
    stderr: str, tool: str | None
) -> None:
    assert missing_tool(stderr) == tool


def test_causes_name_ownership_git_tools_and_read_only_paths() -> None:
    root = "/tmp/p/cloudrunner/repo"
    git = HookExit(0, True, 128, "error", "fatal: detected dubious ownership in repository")
    assert causes_of(git, root) == ["git: dubious ownership (workspace owner is not the hook uid)"]
    tool = HookExit(0, True, 127, "error", "")
    assert causes_of(tool, root) == ["exit 127: a program is missing in the image"]
    eacces = HookExit(0, True, 1, "error", f"EACCES: permission denied, open '{root}/log'")
    assert causes_of(eacces, root)[0].startswith("permission denied on the workspace")
    home = HookExit(0, True, 1, "error", "mkdir: cannot create '/home/x': Read-only file system")
    assert "read-only path" in causes_of(home, root)[0]
    assert causes_of(HookExit(0, True, 0, "ok"), root) == []
    boom = HookExit(0, True, None, "sandbox_error", "", "the engine is gone")
    assert causes_of(boom, root) == ["sandbox error: the engine is gone"]


def _verdict(**kwargs: object) -> Verdict:
    v = Verdict("r", "e", "stop")
    v.answer_same = True
    v.exits = ExitComparison(1, 1, ())
    v.bare_answer_same = True
    v.bare_exits = ExitComparison(1, 1, ())
    for key, value in kwargs.items():
        setattr(v, key, value)
    return v


def test_nothing_to_explain_when_everything_is_the_same() -> None:
    assert explain(_verdict(), [HookExit(0, True, 0, "ok")], "/r") == []


def test_a_missing_side_effect_names_the_workspace_the_hook_uid_cannot_write() -> None:
    v = _verdict(post_same=False)
    facts = WorkspaceFacts(owner_uid=0, mode=0o755, hook_uid=10001, writable=False)
    assert explain(v, [HookExit(0, True, 0, "ok")], "/r", (), facts) == [
        "side effect missing: the workspace (owner uid 0, mode 0755) is not writable by "
        "the hook uid 10001"
    ]
    writable = WorkspaceFacts(owner_uid=10001, mode=0o755, hook_uid=10001, writable=True)
    causes = explain(v, [HookExit(0, True, 0, "ok")], "/r", (), writable)
    assert causes == ["side effect missing: no record says why (see the JSON for stderr)"]


def test_an_unexplained_difference_says_so_rather_than_guessing() -> None:
    v = _verdict(answer_same=False)
    assert explain(v, [HookExit(0, True, 0, "ok")], "/r")[0].startswith("unexplained")


def test_a_host_that_disagrees_with_the_recording_is_reported_as_the_hosts() -> None:
    v = _verdict(bare_answer_same=False)
    assert explain(v, [], "/r") == [
        "bare on this host differs from the recording (host, not cloudrunner)"
    ]


def test_the_stderr_cause_of_a_differing_hook_is_given_and_not_repeated() -> None:
    v = _verdict(answer_same=False, exits=ExitComparison(0, 2, (0, 1)))
    hooks = [
        HookExit(0, True, 127, "error", "sh: 1: npx: not found"),
        HookExit(1, True, 127, "error", "sh: 1: npx: not found"),
    ]
    assert explain(v, hooks, "/r", ["client exit 0"]) == [
        "client exit 0",
        "missing tool in the image: npx",
    ]


def test_ratio_is_of_medians_and_absent_without_bare_time() -> None:
    assert ratio([10.0, 30.0, 20.0], [10.0, 10.0, 40.0]) == 2.0
    assert ratio([], [1.0]) is None
    assert ratio([1.0], [0.0]) is None
    value = ratio([12.0], [10.0])
    assert value is not None and math.isclose(value, 1.2)


def test_a_single_node_hook_event_has_exactly_one_matched_node_command() -> None:
    assert launcher("node .cursor/hooks/x.mjs") == "node"
    assert launcher("/usr/bin/env node x.js") == "node"
    assert launcher('bash -c "node x"') == "bash"
    assert launcher("") == ""
    one = [{"command": "node a.mjs", "matched": True}, {"command": "node b", "matched": False}]
    assert is_single_node_hook(one)
    assert not is_single_node_hook([{"command": "python3 a.py", "matched": True}])
    two = [{"command": "node a", "matched": True}, {"command": "node b", "matched": True}]
    assert not is_single_node_hook(two)
