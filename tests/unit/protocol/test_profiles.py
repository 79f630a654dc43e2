"""Source kinds are one vocabulary: Cursor's four are `SourceKind` (protocol/profiles.py),
Claude Code's three files are `ClaudeOrigin` (protocol/claude_mapping.py); elsewhere in the
package a kind is the enum, never its name written out."""

from __future__ import annotations

import ast

from cloudrunner.protocol.claude_mapping import ClaudeOrigin
from cloudrunner.protocol.profiles import MANAGED_NAMES, SOURCE_NAMES, SourceKind
from tests.support.package_sources import PACKAGE, package_sources

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
        (where, literal)
        for where, text in package_sources(*DEFINING)
        for literal in kind_literals(text)
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


#: `str(...)` of something named a kind that is no source kind being passed on, and why; a
#: source kind is passed as the enum, and written out (a record, a label) with `.value`
STR_OF_KIND = {
    ("audit/stats.py", "kind"): "an audit record's `kind` field as read back, whatever it holds",
    ("audit/writer.py", "kind"): "a record kind (RecordKind or a name) written into the record",
    ("event/runner.py", "execution.cause.kind"): "a sandbox cause's kind, as a span attribute",
    ("protocol/sandbox_causes.py", "self.kind"): "a sandbox cause's kind, in its JSON form",
}


def str_of_kinds(source: str) -> list[str]:
    """The arguments of the `str(...)` calls of `source` on a name or attribute that ends
    in `kind` (or an `or` of them), as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "str"
            and len(node.args) == 1
        ):
            continue
        arg = node.args[0]
        # `str(kind)`, `str(hook.source_kind)`, `str(self.origin or self.kind)`
        operands = arg.values if isinstance(arg, ast.BoolOp) else [arg]
        names = [o.id if isinstance(o, ast.Name) else getattr(o, "attr", "") for o in operands]
        if any(name.endswith("kind") for name in names):
            found.append(ast.unparse(arg))
    return found


def test_no_source_kind_is_turned_into_a_string_to_be_passed_on() -> None:
    converted = {
        (where, expression)
        for where, text in package_sources()
        for expression in str_of_kinds(text)
    }
    assert converted - STR_OF_KIND.keys() == set()
    assert STR_OF_KIND.keys() - converted == set()  # an entry whose call has gone


def test_the_kind_scan_finds_str_of_a_kind() -> None:
    source = (
        "egress.network_for(str(kind), session)\n"
        "labels = SandboxLabels(source=str(hook.source_kind))\n"
        "name = str(self.origin or self.kind)\n"
        "fine = kind.value, str(path), str(self.kinds)\n"
    )
    assert sorted(str_of_kinds(source)) == ["hook.source_kind", "kind", "self.origin or self.kind"]
