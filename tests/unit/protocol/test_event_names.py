"""The event names are one vocabulary (protocol/event_names.py): the protocol core's table,
the audit filters, the client and Claude Code's mapping all take them from there, nothing
else in the package spells one, and the module costs the client nothing to import."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from cloudrunner.protocol import event_names
from cloudrunner.protocol.claude_mapping import CLAUDE_EVENTS
from cloudrunner.protocol.events import EVENTS, suggest_event
from tests.support.package_sources import PACKAGE, package_sources

DEFINING = PACKAGE / "protocol" / "event_names.py"

CURSOR = set(event_names.EVENT_NAMES)
CLAUDE = set(event_names.CLAUDE_EVENT_NAMES)
ALIASES = set(event_names.EVENT_ALIASES)
EVERY_NAME = CURSOR | CLAUDE | ALIASES
#: names distinctive enough to find inside a sentence: Cursor's camelCase ones (`stop` is
#: also a word, and Claude Code's PascalCase names are also matcher subjects' spellings)
CAMEL = {name for name in CURSOR | ALIASES if re.fullmatch(r"[a-z]+[A-Z][A-Za-z]*", name)}
#: a matcher subject is another vocabulary that shares spellings (`_constant("Stop")`: what
#: a matcher of the `stop` event is compared with); DECISIONS is the prose of a generated
#: docs page, which names events in its sentences
NOT_NAMES = {("protocol/events.py", "_constant"), ("protocol/claude_mapping.py", "DECISIONS")}


def test_the_protocol_core_registers_exactly_these_names_in_this_order() -> None:
    assert tuple(EVENTS) == event_names.EVENT_NAMES
    assert len(event_names.EVENT_NAMES) == len(CURSOR) == 21


def test_claude_codes_mapping_covers_exactly_its_names() -> None:
    assert tuple(CLAUDE_EVENTS) == event_names.CLAUDE_EVENT_NAMES
    assert {e.cursor for e in CLAUDE_EVENTS.values()} - {None} <= CURSOR


def test_aliases_point_at_events_and_are_not_events() -> None:
    assert set(event_names.EVENT_ALIASES.values()) <= CURSOR
    assert ALIASES.isdisjoint(CURSOR)
    assert suggest_event("beforeShellCommand") == event_names.BEFORE_SHELL_EXECUTION
    assert suggest_event("UserPromptSubmit") == event_names.BEFORE_SUBMIT_PROMPT


def test_the_blocking_table_names_only_events() -> None:
    assert set(event_names.BLOCKING_EVENTS) <= CURSOR
    assert set(event_names.BLOCKING_EVENTS) == {n for n, s in EVENTS.items() if s.can_block}


def _exempt(tree: ast.Module, where: str) -> set[int]:
    """The string nodes of `where` that are not event names: docstrings, and what NOT_NAMES
    says (a call's arguments or an assignment's value)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        part: ast.AST | None = None
        if isinstance(node, ast.Call) and (where, ast.unparse(node.func)) in NOT_NAMES:
            part = node
        elif isinstance(node, ast.AnnAssign | ast.Assign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any((where, ast.unparse(t)) in NOT_NAMES for t in targets):
                part = node.value
        if part is not None:
            skip.update(id(inner) for inner in ast.walk(part))
    return skip


def _spelled() -> set[tuple[str, str]]:
    """Every string in the package outside event_names.py that is an event name, or holds
    a camelCase one in its text (a message, a help text)."""
    found: set[tuple[str, str]] = set()
    for where, text in package_sources(DEFINING):
        tree = ast.parse(text, where)
        skip = _exempt(tree, where)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                continue
            if id(node) in skip:
                continue
            if node.value in EVERY_NAME:
                found.add((where, node.value))
            found.update(
                (where, word)
                for word in re.findall(r"[A-Za-z]+", node.value)
                if word in CAMEL and word != node.value
            )
    return found


def test_no_event_name_is_spelled_outside_its_defining_module() -> None:
    assert _spelled() == set()


def test_the_scan_finds_a_name_where_one_is_spelled(tmp_path: Path) -> None:
    """The scan reads what it must: a bare name, one inside a message, not a docstring."""
    tree = ast.parse(
        '"""preToolUse in a docstring"""\n'
        'if event == "sessionEnd": pass\n'
        'message = f"the {x} of beforeShellExecution"\n'
        'subject = _constant("Stop")\n'
    )
    skip = _exempt(tree, "protocol/events.py")
    strings = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
    ]
    assert "sessionEnd" in strings
    assert any("beforeShellExecution" in s for s in strings)
    assert "Stop" not in strings and not any("preToolUse" in s for s in strings)


def test_the_module_imports_nothing() -> None:
    tree = ast.parse(DEFINING.read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def test_importing_the_client_does_not_load_the_names() -> None:
    """Only answers given without a daemon need the blocking table: the client's import
    (on every agent step) must not pay for the protocol package."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import cloudrunner.client"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    names = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "cloudrunner.client" in names
    assert not {n for n in names if n.startswith("cloudrunner.protocol")}
