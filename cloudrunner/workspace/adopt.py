"""`adopt()`: take an existing checkout as the workspace, in place, changing nothing; the
checks of a workspace root (`resolve_root`, `check_unchanged`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cloudrunner.workspace.checkout import Workspace, WorkspaceError
from cloudrunner.workspace.git_process import NO_GIT, config_env, git_said, gitpython
from cloudrunner.workspace.locations import redact_url
from cloudrunner.workspace.repo_files import real_path

if TYPE_CHECKING:
    import git


def adopt(path: Path, *, trust_project_hooks: bool = True) -> Workspace:
    """Take an existing checkout at `path` as the workspace, in place, changing nothing.

    `path` may be a subdirectory of a repository (a monorepo package): it stays the root,
    the commit is the enclosing repository's HEAD. Only `git rev-parse` runs in the
    checkout: commands such as `git status` honour settings in the checkout's own
    `.git/config` (core.fsmonitor) that could run programs on the worker host.

    The root is `path` resolved once (symlinks followed, see `resolve_root`); a relative
    path, a path that is not a directory and a git directory (`.git`, anything inside
    one, a bare repository) are refused.
    """
    root = resolve_root(path)
    # The checkout may belong to another user (a cloud agent's); git refuses such a
    # repository unless it is named safe, and rev-parse runs nothing from its config.
    env = {"GIT_TERMINAL_PROMPT": "0"}
    env.update(config_env(os.environ, [("safe.directory", "*")]))
    git = gitpython()
    runner = git.Git(str(root))
    notes: tuple[str, ...] = ()
    try:
        inside_git_dir, shallow = str(
            runner.execute(
                ["git", "rev-parse", "--is-inside-git-dir", "--is-shallow-repository"], env=env
            )
        ).split()
        if inside_git_dir == "true":
            raise WorkspaceError(
                f"workspace {root} is a git directory (a bare repository or the inside of "
                "a .git directory), not a checkout; give the checkout's root"
            )
        commit: str | None = _adopted_commit(runner, env)
    except git.exc.GitCommandError as exc:
        stderr = exc.stderr if isinstance(exc.stderr, str) else ""
        if "not a git repository" in stderr.lower():
            raise WorkspaceError(
                f"workspace {root} is not a git checkout; give a checkout to --workspace "
                "or clone one with --repo"
            ) from None
        raise WorkspaceError(
            f"workspace {root} has no commit checked out ({git_said(stderr)}); "
            "commit or check out a branch first"
        ) from None
    except git.exc.GitCommandNotFound:
        raise WorkspaceError(NO_GIT) from None
    assert isinstance(shallow, str)
    if commit is None:
        notes = ("the repository has no commit yet (its branch is unborn): commit is null",)
    origin: str | None
    try:
        url = runner.execute(["git", "config", "--get", "remote.origin.url"], env=env)
        origin = redact_url(str(url).strip()) if str(url).strip() else None
    except git.exc.GitCommandError:
        origin = None
    workspace = Workspace(
        root=root,
        commit=commit,
        origin=origin,
        ref=None,
        ref_kind="adopted",
        strategy="adopted",
        trust_project_hooks=trust_project_hooks,
        shallow=shallow.strip() == "true",
        notes=notes,
    )
    return workspace


def resolve_root(path: Path) -> Path:
    """The real path of the workspace directory `path`, resolved once: the one path the
    worker uses for the mount, the hooks' working directory and CURSOR_PROJECT_DIR.

    Refuses (WorkspaceError) a relative path (relative to what: the worker's own working
    directory is no answer), a path that does not name a directory, and a git directory
    or anything inside one (hooks would run, and write, in the repository's internals).
    """
    text = str(path)
    if "\0" in text:
        raise WorkspaceError(f"workspace {text!r} contains a NUL byte; give a real directory")
    if not path.is_absolute():
        raise WorkspaceError(
            f"workspace {text!r} is a relative path; give an absolute path (the worker does "
            "not guess what it is relative to)"
        )
    try:
        root = Path(real_path(path))
        is_dir = root.is_dir()
    except (OSError, ValueError) as exc:
        raise WorkspaceError(f"workspace {text!r} is not a usable path ({exc})") from None
    if not is_dir:
        raise WorkspaceError(
            f"workspace {path} does not exist or is not a directory; give the directory of "
            "a checkout"
        )
    if ".git" in root.parts:
        shown = str(path) if str(path) == str(root) else f"{path} (really {root})"
        raise WorkspaceError(
            f"workspace {shown} is a .git directory or inside one, not a checkout; give "
            "the checkout's root"
        )
    return root


def check_unchanged(root: Path) -> None:
    """Refuse (WorkspaceError) a resolved workspace root that is no longer a directory at
    its own real path: a long-lived worker resolves a workspace once, and a checkout
    swapped for a symlink since would otherwise send hooks (and the gate's probe, and the
    project hooks file) to wherever the link leads now."""
    try:
        real = real_path(root)
        is_dir = os.path.isdir(real)
    except (OSError, ValueError) as exc:
        raise WorkspaceError(f"workspace {root} is not usable any more ({exc})") from None
    if real != str(root):
        raise WorkspaceError(
            f"workspace {root} changed into a symlink (to {real}) since it was resolved; "
            "it is refused: adopt the checkout again under its real path"
        )
    if not is_dir:
        raise WorkspaceError(
            f"workspace {root} does not exist any more or is not a directory; restore the checkout"
        )


def _adopted_commit(runner: git.Git, env: Mapping[str, str]) -> str | None:
    """HEAD's commit, or None when HEAD names a branch that has no commit yet (a repository
    made by `git init` and never committed to). Raises GitCommandError otherwise."""
    git = gitpython()
    try:
        commit = runner.execute(["git", "rev-parse", "--verify", "HEAD^{commit}"], env=dict(env))
    except git.exc.GitCommandError:
        if _unborn(runner, env):
            return None
        raise
    assert isinstance(commit, str)
    return commit.strip()


def _unborn(runner: git.Git, env: Mapping[str, str]) -> bool:
    git = gitpython()
    try:
        branch = runner.execute(["git", "symbolic-ref", "-q", "HEAD"], env=dict(env))
    except git.exc.GitCommandError:
        return False
    try:
        runner.execute(["git", "show-ref", "--verify", "-q", str(branch).strip()], env=dict(env))
    except git.exc.GitCommandError:
        return True
    return False
