"""Running git in test repositories."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any


def git(cwd: Path, *args: str) -> str:
    """Run git with a fixed identity in `cwd`; its stdout, stripped."""
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def init_repo(path: Path, *, branch: str | None = "main") -> Path:
    """`git init` at `path` (created if missing), on `branch` (None: git's default); no
    commit."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", *(["-b", branch] if branch else []))
    return path


def committed_repo(path: Path, message: str = "commit", *, branch: str | None = "main") -> Path:
    """Everything under `path` (created if missing) committed in a new repository on
    `branch` (None: git's default)."""
    init_repo(path, branch=branch)
    git(path, "add", "-A")
    git(path, "commit", "-q", "--allow-empty", "-m", message)
    return path


def empty_repo(path: Path) -> Path:
    """A new repository at `path` (created) on branch main with one empty commit."""
    path.mkdir()
    return committed_repo(path, "empty")


def bare_repo(path: Path) -> Path:
    """A new bare repository at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    git(path.parent, "init", "-q", "--bare", str(path))
    return path


def write_hooks(root: Path, hooks: dict[str, Any]) -> Path:
    """`root/.cursor/hooks.json` (directories made) holding `hooks` as a version 1 file;
    `root`."""
    (root / ".cursor").mkdir(parents=True, exist_ok=True)
    (root / ".cursor" / "hooks.json").write_text(json.dumps({"version": 1, "hooks": hooks}))
    return root


def hooks_repo(path: Path, hooks: dict[str, Any]) -> Path:
    """A repository at `path` (created) whose `.cursor/hooks.json` holds `hooks`, committed
    on branch main."""
    (path / ".cursor").mkdir(parents=True)
    return committed_repo(write_hooks(path, hooks), "hooks")


#: a failClosed guard that reads its event and allows it
GUARD = 'cat >/dev/null; echo \'{"permission": "allow"}\''


def guarded_repo(path: Path) -> Path:
    """A repository at `path` (created) with the failClosed shell GUARD and a stop hook
    answering `{}`, committed on main: the guarded checkout of the fail-policy and alert
    tests."""
    return hooks_repo(path, {
        "beforeShellExecution": [{"command": GUARD, "failClosed": True}],
        "stop": [{"command": "cat >/dev/null; echo '{}'"}],
    })  # fmt: skip
