"""The OpenAPI document is generated from the operations and models, and every route's error
replies from the one table of error codes (`cloudrunner.refusals`): the tests compare the
document with the table route by route. (The frozen copy of the hand-written document's
routes and codes this replaced is gone: the comparison with the table supersedes it, and
docs/reference/routes.md, checked by the docsgen test, is the reviewed rendering of it.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cloudrunner import refusals
from cloudrunner.daemon import models
from cloudrunner.daemon.openapi import OPERATIONS, Operation, Reply, document
from cloudrunner.refusals import ErrorCode, Route


def _errors(responses: dict[str, Any]) -> dict[str, list[str]]:
    return {status: sorted(reply["x-error-codes"]) for status, reply in responses.items()
            if "x-error-codes" in reply}  # fmt: skip


def _expected(route: Route | None) -> dict[str, list[str]]:
    """What the table says `route` answers (None: a request that matches no route), written
    out here from TABLE itself rather than through the helper the document uses."""
    out: dict[str, list[str]] = {}
    for code, entry in refusals.TABLE.items():
        if (route in entry.routes) if route is not None else not entry.routes:
            out.setdefault(str(entry.status), []).append(code.value)
    return {status: sorted(codes) for status, codes in out.items()}


def test_each_routes_error_replies_are_its_codes_in_the_table() -> None:
    doc = document()
    by_name = {(op.method.lower(), op.path): op.name for op in OPERATIONS}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            route = by_name[(method, path)]
            assert _errors(op["responses"]) == _expected(route), f"{method.upper()} {path}"
    assert doc["x-unrouted-error-codes"] == _expected(None)
    assert doc["x-unrouted-error-codes"] == {"404": ["not-found"], "405": ["method-not-allowed"]}


def test_every_code_in_the_table_is_answered_somewhere_and_every_documented_code_is_in_it() -> None:
    doc = document()
    documented: set[tuple[str, str]] = set()
    for item in doc["paths"].values():
        for op in item.values():
            for status, codes in _errors(op["responses"]).items():
                documented |= {(status, code) for code in codes}
    for status, codes in doc["x-unrouted-error-codes"].items():
        documented |= {(status, code) for code in codes}
    table = {(str(entry.status), code.value) for code, entry in refusals.TABLE.items()}
    assert documented == table
    # and each code is under one status only
    assert len({code for _, code in documented}) == len(documented) == len(ErrorCode)


def test_every_route_in_the_table_is_an_operation_and_every_operation_is_in_it() -> None:
    assert {op.name for op in OPERATIONS} == set(Route)
    named = set().union(*(entry.routes for entry in refusals.TABLE.values()))
    assert named == set(Route)  # every route answers some code (the token, at least)


def test_the_document_is_plain_json_with_string_codes() -> None:
    doc = document()
    assert json.loads(json.dumps(doc)) == doc
    event = doc["paths"]["/v1/events/{event}"]["post"]["responses"]
    assert all(type(code) is str for code in event["413"]["x-error-codes"])
    assert event["413"]["x-error-codes"] == ["payload-too-large"]
    assert event["401"]["description"] == refusals.DESCRIPTIONS[401]


def test_every_reference_resolves_to_a_model_schema() -> None:
    doc = document()
    schemas = doc["components"]["schemas"]
    text = json.dumps(doc)
    refs = {part.split('"')[0] for part in text.split('"#/components/schemas/')[1:]}
    assert refs and refs <= set(schemas)
    assert schemas["Session"]["properties"].keys() == models.Session.model_fields.keys()
    assert schemas["CreateSession"]["additionalProperties"] is False
    assert set(schemas["GateRequest"]["properties"]["state"]["enum"]) == {"open", "closed", "auto"}
    json.dumps(doc)  # serialisable as is


def test_the_document_and_the_router_come_from_one_table() -> None:
    doc = document()
    assert {(op.method.lower(), op.path) for op in OPERATIONS} == {
        (method, path) for path, item in doc["paths"].items() for method in item
    }
    event = doc["paths"]["/v1/sessions/{session}/events/{event}"]["post"]
    assert [p["name"] for p in event["parameters"]] == ["session", "event"]
    assert "stop" in event["parameters"][1]["schema"]["enum"]


def test_the_error_replies_of_an_event_are_the_table_of_error_codes() -> None:
    """An event route answers every code the worker refuses with, and the daemon's own
    around it (the table's codes of `Route.EVENT`)."""
    doc = document()
    event = doc["paths"]["/v1/sessions/{session}/events/{event}"]["post"]["responses"]
    table = {
        str(status): sorted(str(code) for code, e in refusals.TABLE.items()
                            if e.status == status and Route.EVENT in e.routes)
        for status in {e.status for e in refusals.TABLE.values() if Route.EVENT in e.routes}
    }  # fmt: skip
    assert {status: sorted(reply.get("x-error-codes", [])) for status, reply in event.items()
            if status != "200"} == table  # fmt: skip
    assert {ErrorCode(c) for codes in table.values() for c in codes} >= refusals.WORKER_REFUSALS
    assert doc["paths"]["/v1/events/{event}"]["post"]["responses"] == event


def test_every_code_the_worker_refuses_with_has_a_status() -> None:
    assert set(refusals.TABLE) == set(ErrorCode)
    assert ErrorCode.AUDIT_UNWRITABLE in refusals.WORKER_REFUSALS
    assert ErrorCode.DRAINING not in refusals.WORKER_REFUSALS
    assert refusals.status_of("payload-too-large") == 413
    assert refusals.status_of("no-such-code") == 400


def test_a_reply_on_a_status_the_table_gives_the_route_is_refused_at_import() -> None:
    with pytest.raises(ValueError, match="both a reply and an error code's status"):
        Operation("GET", "/x", Route.HEALTHZ, "x", {200: Reply("ok"), 401: Reply("no")})
    assert 401 in Operation("GET", "/x", Route.HEALTHZ, "x", {200: Reply("ok")}).responses
