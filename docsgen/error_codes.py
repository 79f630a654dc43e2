"""The daemon's error codes, one table row each, from `cloudrunner.refusals` (the table the
daemon answers with and the OpenAPI document is generated from) and the `#:` comment above
each `ErrorCode` member: put into docs/reference/api.md where it says
`<!-- docsgen: error-codes -->`, so a code added in code shows on the page."""

from __future__ import annotations

from cloudrunner.daemon.openapi import OPERATIONS
from cloudrunner.refusals import EVERY_ROUTE, TABLE, ErrorCode, Route
from docsgen.comments import attribute_comments
from docsgen.markdown import code, table


def meanings() -> dict[ErrorCode, str]:
    """Each code and the `#:` comment right above its member."""
    comments = attribute_comments(ErrorCode)
    missing = [c.name for c in ErrorCode if c.name not in comments]
    if missing:
        raise ValueError(f"ErrorCode members without a `#:` comment to document them: {missing}")
    return {c: comments[c.name] for c in ErrorCode}


def routes_text(routes: frozenset[Route]) -> str:
    """Where a code is answered, in the words of the page."""
    if not routes:
        return "a request no route matches"
    if routes == EVERY_ROUTE:
        return "every route"
    shown = ["events" if Route.EVENT in routes else ""]
    shown += [
        code(f"{op.method} {op.path}")
        for op in OPERATIONS
        if op.name in routes and op.name is not Route.EVENT
    ]
    return ", ".join(s for s in shown if s)


def render() -> str:
    rows = [
        (str(entry.status), code(c.value), meanings()[c], routes_text(entry.routes))
        for c, entry in sorted(TABLE.items(), key=lambda item: item[1].status)
    ]
    return table(["status", "code", "meaning", "answered on"], rows)
