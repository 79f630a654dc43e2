"""Running git in test repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path


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


def empty_repo(path: Path) -> Path:
    """A new repository at `path` (created) on branch main with one empty commit."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "commit", "-q", "--allow-empty", "-m", "empty")
    return path


def hooks_repo(path: Path, hooks: dict[str, object]) -> Path:
    """A repository at `path` (created) whose `.cursor/hooks.json` holds `hooks`, committed
    on branch main."""
    import json

    (path / ".cursor").mkdir(parents=True)
    (path / ".cursor" / "hooks.json").write_text(json.dumps({"version": 1, "hooks": hooks}))
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "hooks")
    return path
