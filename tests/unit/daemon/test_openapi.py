"""The OpenAPI document is generated from the operations and models, and keeps the routes,
status codes and error codes of the hand-written document it replaced
(tests/data/openapi_routes.json, taken from it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cloudrunner.daemon import models
from cloudrunner.daemon.openapi import OPERATIONS, document

BEFORE = Path(__file__).parents[2] / "data" / "openapi_routes.json"


def _routes(doc: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            out[f"{method.upper()} {path}"] = {
                code: sorted(reply.get("x-error-codes", []))
                for code, reply in op["responses"].items()
            }
    return out


def test_routes_status_codes_and_error_codes_are_those_of_before() -> None:
    assert _routes(document()) == json.loads(BEFORE.read_text())


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
    from cloudrunner import refusals

    doc = document()
    event = doc["paths"]["/v1/sessions/{session}/events/{event}"]["post"]["responses"]
    table = {
        str(status): sorted(str(code) for code, (s, _) in refusals.TABLE.items() if s == status)
        for status in {s for s, _ in refusals.TABLE.values()}
    }
    assert {status: sorted(reply.get("x-error-codes", [])) for status, reply in event.items()
            if status != "200"} == table  # fmt: skip


def test_every_code_the_worker_refuses_with_has_a_status() -> None:
    from cloudrunner import refusals
    from cloudrunner.refusals import ErrorCode

    assert set(refusals.TABLE) == set(ErrorCode)
    assert ErrorCode.AUDIT_UNWRITABLE in refusals.WORKER_REFUSALS
    assert ErrorCode.DRAINING not in refusals.WORKER_REFUSALS
    assert refusals.status_of("payload-too-large") == 413
    assert refusals.status_of("no-such-code") == 400
