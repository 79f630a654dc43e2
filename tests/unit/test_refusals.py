"""The one table of error codes (`cloudrunner.refusals`): the reference page lists exactly
its codes with their statuses, and no docstring keeps a hand-made list of them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from cloudrunner import refusals
from cloudrunner.daemon.core import DaemonError
from cloudrunner.refusals import ErrorCode, Route
from docsgen import error_codes
from tests.support.package_sources import package_sources

ROOT = Path(__file__).resolve().parents[2]
API_PAGE = ROOT / "docs" / "reference" / "api.md"
PACKAGE = ROOT / "cloudrunner"


def _page_rows() -> set[tuple[int, str]]:
    text = API_PAGE.read_text()
    part = text.split("<!-- docsgen: error-codes -->", 1)[1].split("<!-- /docsgen: error-codes")[0]
    return {
        (int(match[1]), match[2])
        for match in re.finditer(r"^\| (\d{3}) \| `([a-z-]+)` \|", part, re.M)
    }


def test_the_reference_page_lists_exactly_the_tables_codes_and_statuses() -> None:
    assert _page_rows() == {(entry.status, code.value) for code, entry in refusals.TABLE.items()}


def test_every_code_has_a_meaning_for_the_page() -> None:
    meanings = error_codes.meanings()
    assert set(meanings) == set(ErrorCode) and all(meanings.values())


def test_the_page_says_where_each_code_is_answered() -> None:
    assert error_codes.routes_text(refusals.NO_ROUTE) == "a request no route matches"
    assert error_codes.routes_text(refusals.EVERY_ROUTE) == "every route"
    assert error_codes.routes_text(frozenset({Route.EVENT})) == "events"
    shown = error_codes.routes_text(refusals.CONTROL_BODIES)
    assert "`POST /v1/sessions`" in shown and "events" not in shown


def test_no_docstring_lists_error_codes_by_hand() -> None:
    """A docstring naming several codes would be a second list that drifts from the table;
    it points at `cloudrunner.refusals` instead (one code of its own is fine)."""
    values = {code.value for code in ErrorCode}
    found = []
    for where, text in package_sources(PACKAGE / "refusals.py"):
        for node in ast.walk(ast.parse(text)):
            if not isinstance(
                node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
            ):
                continue
            doc = ast.get_docstring(node) or ""
            named = {v for v in values if re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", doc)}
            if len(named) > 1:
                found.append(f"cloudrunner/{where}:{getattr(node, 'name', '')} {named}")
    assert not found


def test_a_daemon_error_takes_its_status_from_the_table() -> None:
    for code, entry in refusals.TABLE.items():
        assert DaemonError("m", code).status == entry.status
    with pytest.raises(KeyError):
        DaemonError("m", "no-such-code").status  # type: ignore[arg-type]  # noqa: B018


def test_by_status_keeps_the_table_order_and_ascending_statuses() -> None:
    event = refusals.by_status(Route.EVENT)
    assert list(event) == sorted(event)
    assert event[400][:4] == (
        ErrorCode.PAYLOAD_NOT_JSON,
        ErrorCode.PAYLOAD_INVALID,
        ErrorCode.PAYLOAD_UNENCODABLE,
        ErrorCode.EVENT_MISSING,
    )
    assert refusals.by_status(None) == {
        404: (ErrorCode.NOT_FOUND,),
        405: (ErrorCode.METHOD_NOT_ALLOWED,),
    }
    assert refusals.by_status(Route.HEALTHZ) == {
        401: (ErrorCode.UNAUTHORIZED,),
        431: (ErrorCode.HEADERS_TOO_LARGE,),
        500: (ErrorCode.INTERNAL,),
    }
