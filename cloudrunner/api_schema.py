"""The OpenAPI 3.1 description of the daemon's API, served at `GET /openapi.json`."""

from __future__ import annotations

from typing import Any

from cloudrunner.protocol.events import EVENTS


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_EVENT_ERRORS = {
    "400": _error(
        "payload-not-json, payload-invalid, payload-unencodable, event-missing, invalid-request"
    ),
    "401": _error("unauthorized (TCP without the bearer token)"),
    "404": _error("unknown-event, unknown-session"),
    "411": _error("length-required"),
    "413": _error("payload-too-large"),
    "422": _error("event-not-in-cloud, workspace-unavailable"),
    "500": _error("worker-error, internal"),
    "503": _error("draining, audit-unwritable, session-state-unavailable"),
}


def _event_operation(summary: str, with_session: bool) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {"name": "event", "in": "path", "required": True,
         "schema": {"type": "string", "enum": sorted(EVENTS)}},
    ]  # fmt: skip
    if with_session:
        params.insert(0, _SESSION_PARAM)
    return {
        "post": {
            "summary": summary,
            "parameters": params,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
            "responses": {
                "200": _json("the merged answer (spec/HOOKS.md section 6)", {"type": "object"}),
                **_EVENT_ERRORS,
            },
        }
    }


_SESSION_PARAM = {"name": "session", "in": "path", "required": True, "schema": {"type": "string"}}

_SESSION = {
    "type": "object",
    "properties": {
        "session": {"type": "string"},
        "workspace": {"type": ["string", "null"]},
        "repo": {"type": ["string", "null"]},
        "ref": {"type": ["string", "null"]},
        "created_at": {"type": "string"},
    },
    "required": ["session"],
}


def document() -> dict[str, Any]:
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
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {
                        "error": {
                            "type": "object",
                            "properties": {
                                "code": {"type": "string"},
                                "message": {"type": "string"},
                            },
                            "required": ["code", "message"],
                        }
                    },
                    "required": ["error"],
                },
                "Session": _SESSION,
            },
        },
        "security": [{}, {"bearer": []}],
        "paths": {
            "/healthz": {"get": {"summary": "the process answers",
                                 "responses": {"200": _json("alive", {"type": "object"})}}},
            "/readyz": {
                "get": {
                    "summary": "the engine and the configured images are reachable",
                    "responses": {
                        "200": _json("ready", {"type": "object"}),
                        "503": _json("not ready, with the reason", {"type": "object"}),
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics",
                    "responses": {"200": {"description": "text exposition format 0.0.4",
                                          "content": {"text/plain": {}}}},
                }
            },
            "/openapi.json": {"get": {"summary": "this document",
                                      "responses": {"200": _json("OpenAPI", {"type": "object"})}}},
            "/v1/events/{event}": _event_operation(
                "answer an event in the default session", with_session=False
            ),
            "/v1/sessions": {
                "get": {"summary": "list daemon sessions",
                        "responses": {"200": _json("sessions", {"type": "object"})}},
                "post": {
                    "summary": "serve another workspace (adopt a checkout, or clone a repo)",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {
                            "type": "object",
                            "properties": {"workspace": {"type": "string"},
                                           "repo": {"type": "string"},
                                           "ref": {"type": "string"}},
                            "additionalProperties": False,
                        }}},
                    },
                    "responses": {
                        "201": _json("created", {"$ref": "#/components/schemas/Session"}),
                        "400": _error("invalid-request"),
                        "429": _error("too-many-sessions"),
                    },
                },
            },
            "/v1/sessions/{session}": {
                "parameters": [_SESSION_PARAM],
                "get": {"summary": "a daemon session",
                        "responses": {"200": _json("session", _SESSION),
                                      "404": _error("unknown-session")}},
                "delete": {"summary": "close a daemon session and its warm sandboxes",
                           "responses": {"200": _json("closed", {"type": "object"}),
                                         "404": _error("unknown-session"),
                                         "409": _error("default-session")}},
            },
            "/v1/sessions/{session}/events/{event}": _event_operation(
                "answer an event in a daemon session", with_session=True
            ),
            "/v1/sessions/{session}/gate": {
                "post": {
                    "summary": "hold the session's writability gate open or closed, or auto",
                    "parameters": [_SESSION_PARAM],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {
                            "type": "object",
                            "properties": {"state": {"enum": ["open", "closed", "auto"]}},
                            "required": ["state"],
                        }}},
                    },
                    "responses": {"200": _json("the gate state", {"type": "object"}),
                                  "400": _error("invalid-request"),
                                  "404": _error("unknown-session")},
                }
            },
        },
    }  # fmt: skip
