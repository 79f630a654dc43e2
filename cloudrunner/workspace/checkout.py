"""The repository hooks run against: cloned at a ref (`clone`), or adopted in place
(`adopt`), as a `Workspace` that records the resolved commit and whether project hooks are
trusted; and the errors of getting one."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cloudrunner.errors import CloudrunnerError

RefKind = Literal["default", "branch", "tag", "ref", "commit", "adopted"]
#: How the history was obtained; documented in README.md.
Strategy = Literal["shallow", "full", "shallow-commit", "full-fallback", "adopted"]


class WorkspaceError(CloudrunnerError):
    """The workspace could not be cloned or adopted."""


class RepositoryNotFound(WorkspaceError):
    """The repository does not exist, or is not one."""


class RefNotFound(WorkspaceError):
    """The repository has no such branch, tag or commit."""


class AuthenticationRequired(WorkspaceError):
    """The repository needs credentials the worker was not given."""


@dataclass(frozen=True)
class Workspace:
    """A checkout hooks run against.

    `root` is the absolute workspace root (project hooks' working directory); `commit` the
    full id of the checked-out commit (None in an adopted repository with no commit yet);
    `origin` the repository URL with any user info removed (None when adopted without a
    remote). `trust_project_hooks` is False when the operator
    configured the workspace as untrusted: then no project hooks load (spec section 2).
    """

    root: Path
    commit: str | None
    origin: str | None
    ref: str | None
    ref_kind: RefKind
    strategy: Strategy
    trust_project_hooks: bool = True
    shallow: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def cursor_dir(self) -> Path:
        return self.root / ".cursor"

    @property
    def project_hooks_file(self) -> Path:
        return self.cursor_dir / "hooks.json"

    @property
    def environment_file(self) -> Path:
        return self.cursor_dir / "environment.json"
