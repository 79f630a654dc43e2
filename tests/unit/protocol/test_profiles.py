"""Source kinds are one vocabulary: Cursor's four are `SourceKind` (protocol/profiles.py),
Claude Code's three files are `ClaudeOrigin` (protocol/claude_mapping.py); elsewhere in the
package a kind is the enum, never its name written out."""

from __future__ import annotations

import ast
from pathlib import Path

import cloudrunner
from cloudrunner.protocol.claude_mapping import ClaudeOrigin
from cloudrunner.protocol.profiles import MANAGED_NAMES, SOURCE_NAMES, SourceKind

PACKAGE = Path(cloudrunner.__file__).parent
DEFINING = {PACKAGE / "protocol" / "profiles.py", PACKAGE / "protocol" / "claude_mapping.py"}
KINDS = {str(kind) for kind in SourceKind} | {str(origin) for origin in ClaudeOrigin}
#: strings spelled like a kind that name something else, and what
NOT_KINDS = {
    ("egress/grants.py", "user"): "a grant's stored unix user",
    ("event/runner.py", "user"): "the user a sandbox attests it ran hooks as",
    ("sandbox/hardening.py", "user"): "a container's user, in the hardening attestation",
    ("sandbox/limits.py", "user"): "a sandbox profile's `user` field (a unix user)",
}


def test_the_names_and_the_enum_agree() -> None:
    assert tuple(SourceKind) == SOURCE_NAMES
    assert MANAGED_NAMES == (SourceKind.ENTERPRISE, SourceKind.TEAM)
    assert [origin.rank for origin in ClaudeOrigin] == [4, 5, 6]


def kind_literals(source: str) -> list[str]:
    """The strings of `source` (docstrings aside) that are a source kind's name."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in KINDS
        and id(node) not in docstrings
    ]


def test_no_kind_is_spelled_outside_its_defining_module() -> None:
    spelled = {
        (str(path.relative_to(PACKAGE)), literal)
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in DEFINING
        for literal in kind_literals(path.read_text())
    }
    assert spelled - NOT_KINDS.keys() == set()


def test_the_scan_finds_a_kind_in_code_not_in_a_docstring() -> None:
    source = (
        '"""Runs project hooks: "project"."""\n'
        'uid = profiles.identity("project", root)\n'
        'allowed = ("enterprise", "claude-user")\n'
        "kind = SourceKind.PROJECT\n"
    )
    assert sorted(kind_literals(source)) == ["claude-user", "enterprise", "project"]
