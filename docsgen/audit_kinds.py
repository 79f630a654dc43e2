"""The audit record kinds, one table row each, from `cloudrunner.audit.records.RecordKind`
and the `#:` comment above each member (the same words the code reads): put into
docs/guides/audit.md and docs/reference/audit-records.md where they say
`<!-- docsgen: audit-kinds -->`, so a kind added in code shows in both."""

from __future__ import annotations

from cloudrunner.audit.records import RecordKind
from docsgen.comments import attribute_comments
from docsgen.markdown import code, table


def meanings() -> dict[str, str]:
    """Each kind's value and the `#:` comment right above its member."""
    comments = attribute_comments(RecordKind)
    missing = [kind.name for kind in RecordKind if kind.name not in comments]
    if missing:
        raise ValueError(f"RecordKind members without a `#:` comment to document them: {missing}")
    return {kind.value: comments[kind.name] for kind in RecordKind}


def render() -> str:
    rows = [(code(kind), meaning) for kind, meaning in meanings().items()]
    return table(["kind", "what it records"], rows)
