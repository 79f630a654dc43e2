"""The diagnostic codes are one vocabulary (protocol/diagnostic_codes.py): each code is
defined there once with its meaning, spelled nowhere else in the package, and used."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from cloudrunner.protocol.config import parse_hooks_file
from cloudrunner.protocol.diagnostic_codes import MEANINGS, DiagnosticCode
from cloudrunner.sources import SourceSettings, SourceStatus, forget_loaded_sources, load_sources
from tests.support.package_sources import PACKAGE, package_sources

DEFINING = PACKAGE / "protocol" / "diagnostic_codes.py"
#: where a code is still spelled out, and why (none left)
KNOWN_SPELLED: set[tuple[str, str]] = set()
#: the calls whose first argument is a diagnostic code
MAKERS = {"error", "warning", "info", "fail", "warn", "RepoFileRefused", "HooksFileRefused"}


def _spelled() -> set[tuple[str, str]]:
    """Where a code is written as a string: a maker's first argument, or compared with a
    `.code`, anywhere in the package but its defining module."""
    codes = {str(code) for code in DiagnosticCode}
    found: set[tuple[str, str]] = set()
    for where, text in package_sources(DEFINING):
        for node in ast.walk(ast.parse(text, where)):
            literals: list[ast.expr] = []
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                receiver = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
                if name in MAKERS and "log" not in receiver.lower():
                    literals.append(node.args[0])
            elif isinstance(node, ast.Compare) and ast.unparse(node.left).endswith(".code"):
                literals.extend(node.comparators)
            found.update(
                (where, lit.value)
                for lit in literals
                if isinstance(lit, ast.Constant) and lit.value in codes
            )
    return found


def test_no_code_is_spelled_outside_its_defining_module() -> None:
    assert _spelled() - KNOWN_SPELLED == set()


def test_every_code_is_used_somewhere() -> None:
    used: set[str] = set()
    for _, text in package_sources(DEFINING):
        used.update(re.findall(r"DiagnosticCode\.([A-Z0-9_]+)", text))
    used.update(DiagnosticCode(code).name for _, code in KNOWN_SPELLED)
    assert {c.name for c in DiagnosticCode} - used == set()


@pytest.mark.parametrize("code", list(DiagnosticCode))
def test_each_code_is_kebab_case_with_a_one_line_meaning(code: DiagnosticCode) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", code.value)
    assert code.name == code.value.upper().replace("-", "_")
    meaning = MEANINGS[code]
    assert meaning.strip() and "\n" not in meaning


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", DiagnosticCode.EMPTY_FILE),
        (b"{", DiagnosticCode.JSON_SYNTAX),
        (b"\xff\xfe{}", DiagnosticCode.NOT_UTF8),
        (b"[1]", DiagnosticCode.NOT_AN_OBJECT),
        (b'{"version": 1, "hooks": {"noSuchEvent": []}}', DiagnosticCode.UNKNOWN_EVENT),
        (b"[" * 100_000 + b"]" * 100_000, DiagnosticCode.TOO_DEEP),
    ],
)
def test_a_hostile_file_is_named_by_a_code_of_the_table(
    data: bytes, expected: DiagnosticCode
) -> None:
    codes = [d.code for d in parse_hooks_file(data, file="hooks.json").diagnostics]
    assert expected in codes
    assert all(type(code) is str and code in set(map(str, DiagnosticCode)) for code in codes)


def test_a_refused_file_reads_as_a_code_of_the_table(tmp_path: Path) -> None:
    """A project hooks file that is a symlink out of the repository: refused, with the
    table's code as a plain string (what the audit records carry)."""
    (tmp_path / "secret").write_text("{}")
    repo = tmp_path / "repo"
    (repo / ".cursor").mkdir(parents=True)
    (repo / ".cursor" / "hooks.json").symlink_to(tmp_path / "secret")
    forget_loaded_sources()
    project = next(
        s for s in load_sources(SourceSettings(workspace=repo)).sources if s.kind == "project"
    )
    forget_loaded_sources()
    assert project.status is SourceStatus.BROKEN
    assert [d.code for d in project.diagnostics] == [DiagnosticCode.SYMLINK_ESCAPE.value]
    assert type(project.diagnostics[0].code) is str
