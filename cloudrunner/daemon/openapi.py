"""The API's operations, and the OpenAPI 3.1 document generated from them and from the
request/response models (served at `GET /openapi.json`).

`OPERATIONS` is the one list of routes: the app routes requests by it and the document is
built from it, so the two cannot drift apart. Each route's error replies come from the one
table of error codes (`cloudrunner.refusals`), which says which routes answer each code; the
codes of a request that matches no route are under the document's `x-unrouted-error-codes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from cloudrunner import refusals
from cloudrunner.daemon import models
from cloudrunner.egress import EgressRules
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.profiles import SOURCE_NAMES
from cloudrunner.refusals import ErrorCode, Route

#: what a path parameter ({session}, {event}) may hold
SEGMENT = r"[A-Za-z0-9_.\-]+"


@dataclass(frozen=True)
class Reply:
    """One status code of an operation: its body model and the error codes it carries."""

    description: str
    model: type[BaseModel] | None = None
    codes: tuple[ErrorCode, ...] = ()
    content_type: str = "application/json"


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    name: Route
    """the app's handler for it (a method of `app.App`)"""
    summary: str
    replies: dict[int, Reply]
    """the replies that are not error codes (success, readyz's 503)"""
    body: type[BaseModel] | None = None
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)
    responses: dict[int, Reply] = field(init=False, repr=False, compare=False)
    """`replies` and the error replies of the route's codes in the table"""

    def __post_init__(self) -> None:
        regex = re.sub(r"\{(\w+)\}", rf"(?P<\1>{SEGMENT})", self.path.replace(".", r"\."))
        object.__setattr__(self, "pattern", re.compile(regex))
        errors = _errors(self.name)
        clash = sorted(set(errors) & set(self.replies))
        if clash:
            raise ValueError(f"{self.method} {self.path}: status {clash} is both a reply and "
                             "an error code's status in cloudrunner.refusals")  # fmt: skip
        object.__setattr__(self, "responses", {**self.replies, **errors})

    @property
    def params(self) -> list[str]:
        return re.findall(r"\{(\w+)\}", self.path)


def _errors(route: Route) -> dict[int, Reply]:
    """The error replies of `route`, generated from the one table of error codes."""
    return {
        status: Reply(refusals.DESCRIPTIONS.get(status, ", ".join(codes)), models.Error, codes)
        for status, codes in refusals.by_status(route).items()
    }


def _event(path: str, summary: str) -> Operation:
    return Operation(
        "POST", path, Route.EVENT, summary,
        {200: Reply("the merged answer of the matching hooks", models.HookAnswer)},
        body=models.EventPayload,
    )  # fmt: skip


OPERATIONS: tuple[Operation, ...] = (
    Operation("GET", "/healthz", Route.HEALTHZ, "the process answers",
              {200: Reply("alive", models.Health)}),
    Operation("GET", "/readyz", Route.READYZ,
              "the engine and the configured images are reachable",
              {200: Reply("ready", models.Readiness),
               503: Reply("not ready, with the reason", models.Readiness)}),
    Operation("GET", "/metrics", Route.METRICS, "Prometheus metrics",
              {200: Reply("text exposition format 0.0.4", content_type="text/plain")}),
    Operation("GET", "/openapi.json", Route.OPENAPI, "this document",
              {200: Reply("OpenAPI")}),
    _event("/v1/events/{event}", "answer an event in the default session"),
    Operation("GET", "/v1/sessions", Route.LIST_SESSIONS, "list daemon sessions",
              {200: Reply("sessions", models.SessionList)}),
    Operation("POST", "/v1/sessions", Route.CREATE_SESSION,
              "serve another workspace (adopt a checkout, or clone a repo)",
              {201: Reply("created", models.Session)},
              body=models.CreateSession),
    Operation("GET", "/v1/sessions/{session}", Route.GET_SESSION, "a daemon session",
              {200: Reply("session", models.Session)}),
    Operation("DELETE", "/v1/sessions/{session}", Route.DELETE_SESSION,
              "close a daemon session and its warm sandboxes",
              {200: Reply("closed", models.ClosedSession)}),
    _event("/v1/sessions/{session}/events/{event}", "answer an event in a daemon session"),
    Operation("POST", "/v1/sessions/{session}/gate", Route.GATE,
              "hold the session's writability gate open or closed, or auto",
              {200: Reply("the gate state", models.GateState)},
              body=models.GateRequest),
    Operation("GET", "/v1/egress", Route.GET_EGRESS, "each source's egress rules in force",
              {200: Reply("the rules", models.EgressView)}),
    Operation("POST", "/v1/egress/{source}", Route.SET_EGRESS,
              "replace one source's egress rules; they hold from its next connection",
              {200: Reply("the rules now in force", models.EgressView)},
              body=EgressRules),
)  # fmt: skip

_PARAMS: dict[str, dict[str, Any]] = {
    "source": {"type": "string", "enum": list(SOURCE_NAMES)},
    "session": {"type": "string", "pattern": f"^{SEGMENT}$"},
    "event": {"type": "string", "enum": sorted(EVENTS)},
}


def _schema(model: type[BaseModel] | None) -> dict[str, Any]:
    if model is None:
        return {"type": "object"}
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _operation(op: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": op.summary, "operationId": f"{op.name}_{op.method.lower()}"}
    if op.params:
        out["parameters"] = [
            {"name": name, "in": "path", "required": True, "schema": _PARAMS[name]}
            for name in op.params
        ]
    if op.body is not None:
        out["requestBody"] = {
            "required": True, "content": {"application/json": {"schema": _schema(op.body)}}
        }  # fmt: skip
    responses: dict[str, Any] = {}
    for status, reply in sorted(op.responses.items()):
        item: dict[str, Any] = {"description": reply.description}
        if reply.content_type == "application/json":
            item["content"] = {"application/json": {"schema": _schema(reply.model)}}
        else:
            item["content"] = {reply.content_type: {}}
        if reply.codes:
            item["x-error-codes"] = [code.value for code in reply.codes]
        responses[str(status)] = item
    out["responses"] = responses
    return out


@cache
def document() -> dict[str, Any]:
    used = {m for op in OPERATIONS for m in (op.body, *(r.model for r in op.responses.values()))}
    unrouted = {
        str(status): [code.value for code in codes]
        for status, codes in refusals.by_status(None).items()
    }
    ordered = sorted((m for m in used if m is not None), key=lambda m: m.__name__)
    _, defs = models_json_schema(
        [(m, "serialization") for m in ordered], ref_template="#/components/schemas/{model}"
    )
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "cloudrunner daemon",
            "version": "1",
            "description": "Answers agent hook events with the merged answer of the hooks a "
            "cloud agent loads, each run in a hardened container.",
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": defs.get("$defs", {}),
        },
        "security": [{}, {"bearer": []}],
        "paths": paths,
        "x-unrouted-error-codes": unrouted,
    }
