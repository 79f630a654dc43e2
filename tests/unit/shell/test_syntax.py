"""The one parser of hook command lines (the pinned digest and validate's program look-up)."""

from __future__ import annotations

import re
import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudrunner.shell import syntax as shell_syntax
from cloudrunner.validate import simple_commands


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("(.cursor/hooks/g.sh)", [[".cursor/hooks/g.sh"]]),
        (".cursor/hooks/g.sh; true", [[".cursor/hooks/g.sh"], ["true"]]),
        (".cursor/hooks/g.sh|cat", [[".cursor/hooks/g.sh"], ["cat"]]),
        ("a && b || c &", [["a"], ["b"], ["c"]]),
        ("X=1 env -i python3 a.py", [["X=1", "env", "-i", "python3", "a.py"]]),
        ('"$CURSOR_PROJECT_DIR"/h.sh 2>&1', [["$CURSOR_PROJECT_DIR/h.sh"]]),
        ("if true; then ./x; fi", [["true"], ["./x"]]),
        ("f() { a; }; f", [["a"], ["f"]]),
        ("sh -c 'b; c'", [["sh", "-c", "b; c"], ["b"], ["c"]]),
        ("a\nb", [["a"], ["b"]]),
    ],
)
def test_every_simple_command_is_found(command: str, expected: list[list[str]]) -> None:
    assert simple_commands(command) == expected


def test_redirections_name_files() -> None:
    parsed = shell_syntax.parse("sh < tools/run.sh > out.log 2>&1")
    assert parsed.commands[0].redirects == ("tools/run.sh", "out.log")
    assert "tools/run.sh" in parsed.words


def _nested(depth: int) -> str:
    command = "x"
    for _ in range(depth):
        command = "sh -c " + re.sub(r"([\\ ])", r"\\\1", command)
    return command


NESTED = _nested(shell_syntax.MAX_NESTING + 2)


@pytest.mark.parametrize(
    ("command", "reported"),
    [
        ("echo $(id)", "command substitution"),
        ("echo `id`", "command substitution"),
        ("diff <(a) b", "process substitution"),
        ("eval x", "eval runs a command built at run time"),
        ("$RUNNER hook.sh", "$RUNNER is known only at run time"),
        ("~/x.sh", "~ is the hook's HOME"),
        ("sh *.sh", "pattern"),
        ("echo 'unbalanced", "cannot be parsed"),
        ("case x in a) b;; esac", "cannot be parsed"),
        ("""sh -c 'a'"'"'b'""", "cannot be parsed"),  # the string is `a'b`
        ("echo $((1+2))", "cannot be parsed"),
        ("x" * (shell_syntax.MAX_COMMAND_CHARS + 1), "longer than"),
        (NESTED, "nested deeper"),
    ],
)
def test_what_cannot_be_seen_is_reported(command: str, reported: str) -> None:
    unseen = shell_syntax.parse(command).unseen
    assert any(reported in line for line in unseen), unseen


def test_workspace_variables_are_not_reported() -> None:
    assert shell_syntax.parse('"${CURSOR_PROJECT_DIR}"/a.sh $CLAUDE_PROJECT_DIR/b').unseen == ()


def test_the_commands_inside_a_substitution_are_still_listed() -> None:
    assert ["cat", "tools/x"] in simple_commands("echo $(cat tools/x)")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_never_raises_on_any_text(text: str) -> None:
    parsed = shell_syntax.parse(text)
    assert all(isinstance(w, str) for w in parsed.words)
    assert all(isinstance(line, str) and "\n" not in line for line in parsed.unseen)


SHELLISH = st.text(alphabet="ab./$(){}|&;<>'\"`\\ \n=*~-c#", max_size=80)


@settings(max_examples=500, deadline=None)
@given(SHELLISH)
def test_shell_like_text_is_parsed_or_reported(text: str) -> None:
    """Either some command was read or the line says why not: never silently nothing."""
    parsed = shell_syntax.parse(text)
    meaningful = any(not c.isspace() and c not in ";&#" for c in text.split("#", 1)[0])
    if meaningful and not parsed.commands and not parsed.other_words:
        assert parsed.unseen, text


@pytest.mark.parametrize(
    ("command", "word"),
    [
        ("""'a'"'"'b'""", "a'b"),
        ("""echo '{"k": "v"}'""", '{"k": "v"}'),
        (r'"c\"d"', 'c"d'),
        (r"a\ b", "a b"),
        (".cursor/'hooks'/\"g.sh\"", ".cursor/hooks/g.sh"),
    ],
)
def test_quotes_are_removed_as_sh_removes_them(command: str, word: str) -> None:
    assert word in shell_syntax.parse(command).words


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\x00$`"), min_size=1,
                        max_size=20), min_size=1, max_size=4))  # fmt: skip
def test_a_quoted_word_reads_back_as_itself(words: list[str]) -> None:
    """Any word quoted for sh is read back unchanged (or the line says why not)."""
    parsed = shell_syntax.parse("true " + " ".join(shlex.quote(w) for w in words))
    if not parsed.unseen:
        assert parsed.commands[0].words == ("true", *words)
