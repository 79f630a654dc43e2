"""The workspace: the checkout hooks run against, and access to it.

checkout (the `Workspace` and the errors of getting one), clone (a repository fetched at a
ref), adopt (an existing checkout taken in place; the checks of a root), head (the commit
checked out now, read from the git directory's files and remembered), locations (repository
URLs and paths, redacted for records), git_credentials (where a clone's secret comes from),
git_process (git's environment and its failures as one-line errors), repo_files (reading a
file of an untrusted repository: only what resolves inside it), match (the payload's
workspace_roots against the configured root), ownership (granting the hooks' users access
to a checkout), acl (POSIX ACLs as bytes). ownership, acl and match are used as modules.
"""

from cloudrunner.workspace import acl, match, ownership
from cloudrunner.workspace.adopt import adopt, check_unchanged, resolve_root
from cloudrunner.workspace.checkout import (
    AuthenticationRequired,
    RefKind,
    RefNotFound,
    RepositoryNotFound,
    Strategy,
    Workspace,
    WorkspaceError,
)
from cloudrunner.workspace.clone import DEFAULT_GIT_TIMEOUT, clone
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
