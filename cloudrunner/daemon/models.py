"""The API's request and response bodies, as pydantic models: the app validates requests
with them and the OpenAPI document (`openapi.py`) takes their JSON schemas."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, RootModel

from cloudrunner.egress import EgressRules


class ErrorDetail(BaseModel):
    code: str
    """stable, for programs: unknown-session, payload-too-large, ..."""
    message: str
    """one line for people: what is wrong and what to do"""


class Error(BaseModel):
    """Every error answer."""

    error: ErrorDetail


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    """the daemon's cloudrunner version (clients say when theirs differs)"""
    commit: str
    """the commit it was built from (12 hex digits, +dirty for a changed tree), or unknown"""


class Readiness(BaseModel):
    """Whether events can run now, and why not."""

    model_config = ConfigDict(extra="allow")
    ready: bool
    reason: str | None = None
    engine: bool | None = None
    images: list[str] | None = None
    missing_images: list[str] | None = None
    warm_sandboxes: int | None = None


class Session(BaseModel):
    """A daemon session: the default one, or one created for another workspace or repo."""

    session: str
    workspace: str | None
    repo: str | None
    """the repository URL, without any user name or password"""
    ref: str | None
    created_at: str


class SessionList(BaseModel):
    sessions: list[Session]


class CreateSession(BaseModel):
    """Exactly one of `workspace` (a checkout to adopt) or `repo` (to clone, at `ref`)."""

    model_config = ConfigDict(extra="forbid")
    workspace: str | None = None
    repo: str | None = None
    ref: str | None = None


class ClosedSession(BaseModel):
    session: str
    closed_sandboxes: int


class EgressView(BaseModel):
    """Each source's egress rules in force, and the proxy's state."""

    enterprise: EgressRules
    team: EgressRules
    project: EgressRules
    user: EgressRules
    proxy: str


class GateRequest(BaseModel):
    state: Literal["open", "closed", "auto"]


class GateState(BaseModel):
    session: str
    mode: Literal["open", "closed", "auto"]
    generation: int


class EventPayload(RootModel[dict[str, Any]]):
    """The hook event's payload, as the agent sends it to a command hook."""


class HookAnswer(RootModel[dict[str, Any]]):
    """The merged answer of every matching hook, as a command hook would print it."""
