"""The audit record kinds, one table row each, from `cloudrunner.audit.records.RecordKind`
and the `#:` comment above each member (the same words the code reads): put into
docs/guides/audit.md and docs/reference/audit-records.md where they say
`<!-- docsgen: audit-kinds -->`, so a kind added in code shows in both."""

from __future__ import annotations

import ast
import inspect

from cloudrunner.audit.records import RecordKind
from docsgen.markdown import code, table


def meanings() -> dict[str, str]:
    """Each kind's value and the `#:` comment lines right above its member."""
    source = inspect.getsource(RecordKind)
    lines = source.splitlines()
    found: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:  # type: ignore[attr-defined]
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
            continue
        comment: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#:"):
            comment.insert(0, lines[row].strip()[2:].strip())
            row -= 1
        member = RecordKind[node.targets[0].id]
        if not comment:
            raise ValueError(f"RecordKind.{member.name} has no `#:` comment to document it")
        found[member.value] = " ".join(comment)
    missing = {kind.value for kind in RecordKind} - set(found)
    if missing:
        raise ValueError(f"RecordKind members without a documented value: {sorted(missing)}")
    return found


def render() -> str:
    rows = [(code(kind), meaning) for kind, meaning in meanings().items()]
    return table(["kind", "what it records"], rows)
