"""The workspace: the checkout hooks run against, and access to it.

checkout (the `Workspace` and the errors of getting one), clone (a repository fetched at a
ref), adopt (an existing checkout taken in place; the checks of a root), head (the commit
checked out now, read from the git directory's files and remembered), locations (repository
URLs and paths, redacted for records), git_credentials (where a clone's secret comes from),
git_process (git's environment and its failures as one-line errors), repo_files (reading a
file of an untrusted repository: only what resolves inside it), match (the payload's
workspace_roots against the configured root), ownership (granting the hooks' users access
to a checkout), acl (POSIX ACLs as bytes). ownership, acl and match are used as modules.

The names of adopt and clone are loaded on first use (`__getattr__`): they import GitPython,
which fails at import on a machine without git, and the package's git-free parts (reading
a repository's files, which `images` uses) are on paths that must work there too
(`cloudrunner --version` in the worker image's build stage, which has no git).
"""

import importlib
from typing import TYPE_CHECKING, Any

from cloudrunner.workspace import acl, match, ownership
from cloudrunner.workspace.checkout import (
    AuthenticationRequired,
    RefKind,
    RefNotFound,
    RepositoryNotFound,
    Strategy,
    Workspace,
    WorkspaceError,
)
from cloudrunner.workspace.git_credentials import DEFAULT_USERNAME, Credentials
from cloudrunner.workspace.head import head_commit
from cloudrunner.workspace.locations import LocationKind, classify_source, redact_url
from cloudrunner.workspace.ownership import AccessReport, WorkspaceAccessError, grant_workspace
from cloudrunner.workspace.repo_files import (
    RepoFileRefused,
    inside,
    open_inside,
    read_inside,
    real_path,
    resolves_inside,
)

if TYPE_CHECKING:
    from cloudrunner.workspace.adopt import adopt, check_unchanged, resolve_root
    from cloudrunner.workspace.clone import DEFAULT_GIT_TIMEOUT, clone

#: the names that import GitPython, and their modules
_WITH_GIT = {
    "adopt": "adopt",
    "check_unchanged": "adopt",
    "resolve_root": "adopt",
    "DEFAULT_GIT_TIMEOUT": "clone",
    "clone": "clone",
}


def __getattr__(name: str) -> Any:
    module = _WITH_GIT.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_GIT_TIMEOUT",
    "DEFAULT_USERNAME",
    "AccessReport",
    "AuthenticationRequired",
    "Credentials",
    "LocationKind",
    "RefKind",
    "RefNotFound",
    "RepoFileRefused",
    "RepositoryNotFound",
    "Strategy",
    "Workspace",
    "WorkspaceAccessError",
    "WorkspaceError",
    "acl",
    "adopt",
    "check_unchanged",
    "classify_source",
    "clone",
    "grant_workspace",
    "head_commit",
    "inside",
    "match",
    "open_inside",
    "ownership",
    "read_inside",
    "real_path",
    "redact_url",
    "resolve_root",
    "resolves_inside",
]
