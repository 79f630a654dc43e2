"""`clone()`: fetch a repository (https, http, ssh, `file://` or a local path) at a branch,
tag or commit, shallow by default, into a new `Workspace`."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

from cloudrunner.workspace.checkout import (
    AuthenticationRequired,
    RefKind,
    RefNotFound,
    Strategy,
    Workspace,
    WorkspaceError,
)
from cloudrunner.workspace.git_credentials import Credentials
from cloudrunner.workspace.git_process import GitAccess, GitRunner, git_access
from cloudrunner.workspace.locations import GitSource, parse_source
from cloudrunner.workspace.repo_files import real_path

DEFAULT_GIT_TIMEOUT = 600.0
_HEX = re.compile(r"[0-9a-fA-F]{4,40}")


def clone(
    source: str,
    dest: Path,
    *,
    ref: str | None = None,
    shallow: bool = True,
    credentials: Credentials | None = None,
    trust_project_hooks: bool = True,
    timeout: float = DEFAULT_GIT_TIMEOUT,
) -> Workspace:
    """Clone `source` into `dest` (absent or empty) at `ref` and return the Workspace.

    `ref` is a branch, a tag, a full ref name (`refs/pull/1/head`) or a commit id (full or
    abbreviated); None means the remote's default branch. Shallow (depth 1) by default; a
    commit a shallow fetch cannot reach is fetched by id, or failing that with full history.
    Raises RepositoryNotFound, RefNotFound, AuthenticationRequired or WorkspaceError, each a
    one-line message without any secret; `dest` is removed again when the clone fails.
    """
    parsed = parse_source(source)
    dest = dest.absolute()
    created = not dest.exists()
    if not created and (not dest.is_dir() or any(dest.iterdir())):
        raise WorkspaceError(f"clone destination {dest} exists and is not an empty directory")
    with git_access(parsed, credentials) as access:
        try:
            workspace = _clone_into(parsed, dest, ref, shallow, access, timeout, credentials)
            workspace = replace(workspace, trust_project_hooks=trust_project_hooks)
        except BaseException:
            if created:
                shutil.rmtree(dest, ignore_errors=True)
            else:
                for child in dest.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
            raise
    return workspace


def _clone_into(
    source: GitSource,
    dest: Path,
    ref: str | None,
    shallow: bool,
    access: GitAccess,
    timeout: float,
    credentials: Credentials | None,
) -> Workspace:
    dest.mkdir(parents=True, exist_ok=True)
    runner = GitRunner(dest, access, timeout, source, credentials)
    runner.run("init", "-q")
    runner.run("remote", "add", "origin", source.url)
    refs, head_target = runner.ls_remote()
    depth = ["--depth=1"] if shallow else []
    notes: list[str] = []

    if ref is None:
        if head_target and head_target in refs:
            branch = head_target.removeprefix("refs/heads/")
            runner.fetch(*depth, "--no-tags", f"+{head_target}:refs/remotes/origin/{branch}")
            runner.run("checkout", "-q", "-B", branch, "--track", f"origin/{branch}")
            ref_kind: RefKind = "default"
        elif "HEAD" in refs:
            runner.fetch(*depth, "--no-tags", "HEAD")
            runner.run("checkout", "-q", "--detach", "FETCH_HEAD")
            ref_kind = "default"
        elif not refs:
            # a repository without any commit yet: nothing to fetch, its branch is unborn
            # (as after `git clone` of it); adopted and run like any other, commit null
            return Workspace(
                root=dest,
                commit=None,
                origin=source.url,
                ref=None,
                ref_kind="default",
                strategy="full",
                notes=("the repository has no commit yet: commit is null",),
            )
        else:
            raise RefNotFound(
                f"repository {source.url} has no default branch (it may be empty); "
                "give a ref with --ref"
            )
        strategy: Strategy = "shallow" if shallow else "full"
    elif f"refs/heads/{ref}" in refs:
        runner.fetch(*depth, "--no-tags", f"+refs/heads/{ref}:refs/remotes/origin/{ref}")
        runner.run("checkout", "-q", "-B", ref, "--track", f"origin/{ref}")
        ref_kind, strategy = "branch", ("shallow" if shallow else "full")
    elif f"refs/tags/{ref}" in refs:
        runner.fetch(*depth, "--no-tags", f"+refs/tags/{ref}:refs/tags/{ref}")
        runner.run("checkout", "-q", "--detach", f"refs/tags/{ref}^{{commit}}")
        ref_kind, strategy = "tag", ("shallow" if shallow else "full")
    elif ref.startswith("refs/") and ref in refs:
        runner.fetch(*depth, "--no-tags", ref)
        runner.run("checkout", "-q", "--detach", "FETCH_HEAD")
        ref_kind, strategy = "ref", ("shallow" if shallow else "full")
    elif _HEX.fullmatch(ref):
        strategy = _fetch_commit(runner, ref, refs, shallow, notes)
        ref_kind = "commit"
    else:
        raise RefNotFound(
            f"ref {ref!r} does not exist in {source.url}: no branch, tag or commit has that "
            "name; check --ref"
        )
    commit = runner.run("rev-parse", "--verify", "HEAD^{commit}").strip()
    is_shallow = runner.run("rev-parse", "--is-shallow-repository").strip() == "true"
    return Workspace(
        root=Path(real_path(dest)),
        commit=commit,
        origin=source.url,
        ref=ref,
        ref_kind=ref_kind,
        strategy=strategy,
        shallow=is_shallow,
        notes=tuple(notes),
    )


def _fetch_commit(
    runner: GitRunner, ref: str, refs: dict[str, str], shallow: bool, notes: list[str]
) -> Strategy:
    """Fetch commit `ref`: by id at depth 1 when allowed, else the full history."""
    wanted = ref.lower()
    if shallow and len(wanted) == 40:
        try:
            runner.fetch("--depth=1", "--no-tags", wanted)
        except WorkspaceError as exc:
            if isinstance(exc, AuthenticationRequired):
                raise
            notes.append(
                "the server refused to send a commit by id at depth 1 "
                f"({exc.message}); fetched the full history instead"
            )
        else:
            if runner.has_commit(wanted):
                runner.run("checkout", "-q", "--detach", wanted)
                return "shallow-commit"
    runner.fetch("--tags", "+refs/heads/*:refs/remotes/origin/*")
    if not runner.has_commit(wanted):
        raise RefNotFound(
            f"ref {ref!r} does not exist in {runner.source.url}: no branch, tag or commit "
            "reachable from its branches and tags has that name; check --ref"
        )
    runner.run("checkout", "-q", "--detach", f"{wanted}^{{commit}}")
    if shallow and len(wanted) == 40:
        return "full-fallback"
    if shallow:
        notes.append("an abbreviated commit id needs the full history; fetched it")
        return "full-fallback"
    return "full"
