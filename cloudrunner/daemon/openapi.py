"""The API's operations, and the OpenAPI 3.1 document generated from them and from the
request/response models (served at `GET /openapi.json`).

`OPERATIONS` is the one list of routes: the app routes requests by it and the document is
built from it, so the two cannot drift apart.
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
from cloudrunner.egress.rules import EgressRules
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.profiles import SOURCE_NAMES

#: what a path parameter ({session}, {event}) may hold
SEGMENT = r"[A-Za-z0-9_.\-]+"


@dataclass(frozen=True)
class Reply:
    """One status code of an operation: its body model and the error codes it carries."""

    description: str
    model: type[BaseModel] | None = None
    codes: tuple[str, ...] = ()
    content_type: str = "application/json"


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    name: str
    """the app's handler for it (a method of `app.App`)"""
    summary: str
    responses: dict[int, Reply]
    body: type[BaseModel] | None = None
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        regex = re.sub(r"\{(\w+)\}", rf"(?P<\1>{SEGMENT})", self.path.replace(".", r"\."))
        object.__setattr__(self, "pattern", re.compile(regex))

    @property
    def params(self) -> list[str]:
        return re.findall(r"\{(\w+)\}", self.path)


def _error(*codes: str) -> Reply:
    return Reply(", ".join(codes), models.Error, codes)


#: the error replies of an event request, generated from the one table of error codes
_EVENT_ERRORS: dict[int, Reply] = {
    status: Reply(refusals.DESCRIPTIONS.get(status, ", ".join(codes)), models.Error, codes)
    for status, codes in refusals.by_status().items()
}


def _event(path: str, summary: str) -> Operation:
    return Operation(
        "POST", path, "event", summary,
        {200: Reply("the merged answer of the matching hooks", models.HookAnswer),
         **_EVENT_ERRORS},
        body=models.EventPayload,
    )  # fmt: skip


OPERATIONS: tuple[Operation, ...] = (
    Operation("GET", "/healthz", "healthz", "the process answers",
              {200: Reply("alive", models.Health)}),
    Operation("GET", "/readyz", "readyz", "the engine and the configured images are reachable",
              {200: Reply("ready", models.Readiness),
               503: Reply("not ready, with the reason", models.Readiness)}),
    Operation("GET", "/metrics", "metrics", "Prometheus metrics",
              {200: Reply("text exposition format 0.0.4", content_type="text/plain")}),
    Operation("GET", "/openapi.json", "openapi", "this document",
              {200: Reply("OpenAPI")}),
    _event("/v1/events/{event}", "answer an event in the default session"),
    Operation("GET", "/v1/sessions", "list_sessions", "list daemon sessions",
              {200: Reply("sessions", models.SessionList)}),
    Operation("POST", "/v1/sessions", "create_session",
              "serve another workspace (adopt a checkout, or clone a repo)",
              {201: Reply("created", models.Session), 400: _error("invalid-request"),
               429: _error("too-many-sessions")},
              body=models.CreateSession),
    Operation("GET", "/v1/sessions/{session}", "get_session", "a daemon session",
              {200: Reply("session", models.Session), 404: _error("unknown-session")}),
    Operation("DELETE", "/v1/sessions/{session}", "delete_session",
              "close a daemon session and its warm sandboxes",
              {200: Reply("closed", models.ClosedSession), 404: _error("unknown-session"),
               409: _error("default-session")}),
    _event("/v1/sessions/{session}/events/{event}", "answer an event in a daemon session"),
    Operation("POST", "/v1/sessions/{session}/gate", "gate",
              "hold the session's writability gate open or closed, or auto",
              {200: Reply("the gate state", models.GateState), 400: _error("invalid-request"),
               404: _error("unknown-session")},
              body=models.GateRequest),
    Operation("GET", "/v1/egress", "get_egress", "each source's egress rules in force",
              {200: Reply("the rules", models.EgressView)}),
    Operation("POST", "/v1/egress/{source}", "set_egress",
              "replace one source's egress rules; they hold from its next connection",
              {200: Reply("the rules now in force", models.EgressView),
               400: _error("invalid-request"), 503: _error("egress-unavailable")},
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
            item["x-error-codes"] = list(reply.codes)
        responses[str(status)] = item
    out["responses"] = responses
    return out


@cache
def document() -> dict[str, Any]:
    used = {m for op in OPERATIONS for m in (op.body, *(r.model for r in op.responses.values()))}
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
    }
