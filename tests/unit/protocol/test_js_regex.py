"""Matchers read as JavaScript reads them, searched within a time budget."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.js_regex import JsSyntaxError, code_units, translate
from cloudrunner.protocol.loops import InMemoryLoopCounterStore
from cloudrunner.protocol.matchers import compile_matcher, match
from cloudrunner.protocol.merge import merge
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.plan import build_plan
from cloudrunner.protocol.profiles import SourceKind
from tests.unit.protocol.helpers import source
from tests.unit.protocol.js_regex_table import KNOWN_DIFFERENCES, ROWS

#: exponential for any backtracking engine, `regex` included (unlike `^(a+)+$`, whose
#: required-character check `regex` short-circuits)
EXPLOSIVE = "^(a|aa)+$"
EXPLOSIVE_SUBJECT = "a" * 60 + "!"


def js_test(pattern: str, subject: str) -> bool | None:
    """What `new RegExp(pattern).test(subject)` gives here (None: the pattern is invalid)."""
    matcher = compile_matcher(pattern)
    if matcher.error is not None:
        return None
    if matcher.matches_everything:  # "" (as in JavaScript) and "*" (the protocol's wildcard)
        return True
    assert matcher.pattern is not None
    return matcher.pattern.search(code_units(subject), timeout=5) is not None


@pytest.mark.parametrize(("pattern", "subject", "expected"), ROWS)
def test_each_row_of_the_table_reads_as_javascript(
    pattern: str, subject: str, expected: bool | None
) -> None:
    assert js_test(pattern, subject) is expected


@pytest.mark.parametrize(("pattern", "subject", "javascript"), KNOWN_DIFFERENCES)
def test_the_documented_difference_still_holds(
    pattern: str, subject: str, javascript: bool
) -> None:
    assert js_test(pattern, subject) is (not javascript)


def test_an_invalid_pattern_says_why_in_one_line() -> None:
    for pattern in ("(?i)rm", "(?P<x>a)", "a++", "(a", "[a"):
        error = compile_matcher(pattern).error
        assert error is not None and "\n" not in error, pattern
    assert "not ECMAScript syntax" in (compile_matcher("(?i)rm").error or "")
    assert "nothing to repeat" in (compile_matcher("a++").error or "")


def test_nested_repetition_and_repeated_alternatives_are_flagged() -> None:
    assert translate("^(a+)+$").backtracking == ["`(a+)+` repeats a group that holds a quantifier"]
    assert translate("(a|aa)*c").backtracking == [
        "`(a|aa)*` repeats a group that holds alternatives"
    ]
    assert translate("((x*))*").backtracking  # nested twice over
    assert translate("(a+){2,}").backtracking
    # bounded repetition and plain groups are fine
    for tame in ("(a+)?", "(ab)+", "(a+){1}", "rm|git\\s+push", "(?:a|b)", "[a+]+"):
        assert translate(tame).backtracking == [], tame


def test_escapes_javascript_reads_as_letters_are_noted() -> None:
    assert translate(r"git\Z").notes == [
        "`\\Z` is not an ECMAScript escape: JavaScript matches the letter Z"
    ]
    assert translate(r"\d\s\w").notes == []


def test_compiled_once_per_pattern() -> None:
    assert compile_matcher("Shell|Read") is compile_matcher("Shell|Read")


def test_a_search_over_budget_is_a_match_timeout() -> None:
    spec = EVENTS["beforeShellExecution"]
    payload = spec.input_model.model_validate({"command": EXPLOSIVE_SUBJECT})
    result = match(compile_matcher(EXPLOSIVE), spec, payload, timeout_s=0.01)
    assert result.timed_out and not result.matched
    assert result.reason.startswith("match_timeout: ")
    assert "10 ms" in result.reason and "matcher_timeout_ms" in result.reason


@pytest.mark.parametrize("fail_closed", [True, False])
def test_a_timed_out_matcher_does_not_run_its_hook_and_blocks_when_fail_closed(
    fail_closed: bool,
) -> None:
    hooks = {"beforeShellExecution": [{"command": "guard", "matcher": EXPLOSIVE,
                                       "failClosed": fail_closed}]}  # fmt: skip
    plan = build_plan(
        [source(SourceKind.PROJECT, hooks)],
        "beforeShellExecution",
        {"command": EXPLOSIVE_SUBJECT},
        matcher_timeout=0.01,
    )
    assert plan.hooks_to_run == ()
    (result,) = plan.resolved
    assert result.outcome is Outcome.MATCH_TIMEOUT
    assert result.outcome.is_failure
    merged = merge(plan, plan.resolved, InMemoryLoopCounterStore())
    if fail_closed:
        assert merged.answer["permission"] == "deny"
        assert "match_timeout" in merged.answer["agent_message"]
        assert merged.decisions[0].summary.startswith("match_timeout: ")
    else:
        assert merged.answer == {"permission": "allow"}
        assert "ignored (fail-open)" in merged.decisions[0].summary


def test_a_search_lets_other_threads_run() -> None:
    """`regex` releases the GIL while it searches: another thread finishes its (pure
    Python) work while the search is still going. Python's `re` holds the GIL for the whole
    search, so there the other thread could only finish after it."""
    pattern = compile_matcher(EXPLOSIVE).pattern
    assert pattern is not None
    searching = threading.Event()
    outcome: list[str] = []

    def search() -> None:
        searching.set()
        try:
            pattern.search("a" * 200 + "!", timeout=5)
        except TimeoutError:
            outcome.append("timeout")

    thread = threading.Thread(target=search, daemon=True)
    thread.start()
    searching.wait()
    total = sum(i * i for i in range(200_000))  # needs the GIL throughout
    still_searching = thread.is_alive()
    assert total > 0
    assert still_searching, "the search held the GIL until it ended"


def test_the_engine_is_regex_with_ascii_classes() -> None:
    pattern = compile_matcher(r"\w").pattern
    assert isinstance(pattern, regex.Pattern)
    assert pattern.flags & regex.ASCII


_ALPHABET = st.sampled_from(
    [
        *"ab.$^|*+?()[]{}-,\\ \n",
        *("\\d", "\\s", "\\S", "\\w", "\\b", "(?<n>", "\\k<n>", "(?=", "(?!", "(?<="),
        *("[^", "{2}", "{1,3}", "\\1", "é"),
    ]
)
_PATTERNS = st.lists(_ALPHABET, max_size=12).map("".join)


@given(_PATTERNS | st.text(max_size=30))
@settings(max_examples=400, deadline=None)
def test_any_text_is_a_matcher_or_a_one_line_error(source_text: str) -> None:
    try:
        translated = translate(source_text)
    except JsSyntaxError as exc:
        assert "\n" not in str(exc)
        return
    matcher = compile_matcher(source_text)
    if source_text in ("", "*"):
        assert matcher.matches_everything
        return
    assert matcher.pattern is not None or matcher.error is not None
    if matcher.pattern is not None:
        assert translated.pattern == matcher.translation.pattern  # type: ignore[union-attr]
        with contextlib.suppress(TimeoutError):
            matcher.pattern.search("ab a\nb 12 é", timeout=1)


_NODE = shutil.which("node")


@pytest.mark.skipif(_NODE is None, reason="node is not installed: no JavaScript to compare with")
@given(st.lists(st.tuples(_PATTERNS, st.text(alphabet="ab \n1é-", max_size=8)), min_size=50,
                max_size=50))  # fmt: skip
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_patterns_match_as_in_node(cases: list[tuple[str, str]]) -> None:
    """The same verdict as Node.js's RegExp for random patterns from JavaScript's syntax."""
    assert _NODE is not None
    script = (
        "const rows = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(rows.map(([p, s]) => {"
        " try { return new RegExp(p).test(s) } catch (e) { return null } })))"
    )
    proc = subprocess.run(
        [_NODE, "-e", script], input=json.dumps(cases), capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    for (pattern, subject), expected in zip(cases, json.loads(proc.stdout), strict=True):
        if pattern == "*":  # the protocol's wildcard, not a JavaScript pattern
            continue
        assert js_test(pattern, subject) is expected, (pattern, subject)
