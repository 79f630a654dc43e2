"""Laying a repository out for one event, as the parity data set's README describes: a fresh
copy of the cached tree (modes and symlinks kept), the repository's own layout step, then
`git init` + `git add -A -f` + one commit.

The `layout` column of cases.json is prose; `STEPS` is this runner's reading of it, as shell
commands run in the copy's root. A repository whose layout is neither "as committed" nor in
`STEPS` is skipped with that reason, never laid out by guesswork.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.parity.cases import Repository

#: the environment of every shell snippet on the host (the data set's bare environment)
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

STEPS: dict[str, tuple[str, ...]] = {
    "WINDGAND__to-goal-skill": (
        "mkdir -p .cursor && cp integrations/cursor/hooks.json .cursor/hooks.json",
    ),
    "coldtatooine__vun-skill-pack": ("bash cursor/install.sh .",),
    "enumind__modonome": (
        "mkdir -p .cursor && cp templates/.cursor/hooks.json .cursor/hooks.json",
    ),
    "Percival-You__feature-delivery-kit": ("bash scripts/install.sh .",),
    "Hyper-AI-Lab__cursor-dual-agent-loop": ("bash scripts/install-into-repo.sh .",),
    "xaversebastian__agent-guardrails-kit": (
        "bash install.sh . --runtime cursor --copy",
        "cp examples/cursor/hooks.json .cursor/hooks.json",
    ),
    "vburb__code-configs": ("cp -a templates/.cursor .cursor",),
}
#: repositories whose committed `.cursor/*` are absolute symlinks into the author's home
RESOLVE_SYMLINKS = frozenset({"yu-iskw__secure-coding-agent-config-examples"})


class LayoutError(Exception):
    pass


@dataclass(frozen=True)
class Plan:
    steps: tuple[str, ...]
    resolve_symlinks: bool


def plan_for(repo: Repository) -> Plan:
    """How to lay `repo` out; LayoutError names what is unknown."""
    if repo.name in STEPS:
        return Plan(STEPS[repo.name], False)
    if repo.name in RESOLVE_SYMLINKS:
        return Plan((), True)
    if repo.layout.strip().lower().startswith("as committed"):
        return Plan((), False)
    raise LayoutError(f"no layout step known for {repo.name} (cases.json says: {repo.layout})")


def host_env(home: Path, root: Path | None = None) -> dict[str, str]:
    env = {"PATH": HOST_PATH, "HOME": str(home), "LANG": "C.UTF-8"}
    if root is not None:
        env["CURSOR_PROJECT_DIR"] = env["CLAUDE_PROJECT_DIR"] = str(root)
    return env


def in_repo(target: str, root: Path) -> Path | None:
    """The file inside `root` an absolute symlink target names: the longest tail of the
    target's path that exists under `root` (`/Users/yu/src/configs/cursor/hooks.json` ->
    `root/cursor/hooks.json`)."""
    parts = Path(target).parts[1:]
    for start in range(len(parts)):
        candidate = root.joinpath(*parts[start:])
        if candidate.exists() and not candidate.is_symlink():
            return candidate
    return None


def resolve_symlinks(root: Path) -> list[str]:
    """Each absolute symlink under `.cursor/` becomes a copy of the file it names inside the
    repository; every other absolute symlink that dangles is removed. What was done, per path."""
    done = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in [*filenames, *dirnames]:
            path = Path(dirpath) / name
            if not path.is_symlink():
                continue
            target = os.readlink(path)
            if not os.path.isabs(target):
                continue
            rel = path.relative_to(root)
            source = in_repo(target, root) if rel.parts[0] == ".cursor" else None
            path.unlink()
            if source is None:
                if os.path.exists(target):  # pragma: no cover - only on the author's machine
                    continue
                done.append(f"{rel}: dangling, dropped")
            elif source.is_dir():
                shutil.copytree(source, path, symlinks=True)
                done.append(f"{rel}: copy of {source.relative_to(root)}")
            else:
                shutil.copy2(source, path)
                done.append(f"{rel}: copy of {source.relative_to(root)}")
    return done


def run_shell(
    snippet: str, root: Path, home: Path, timeout_s: float = 120, *, check: bool = True
) -> str:
    """Run a snippet with /bin/sh -c in `root`; its stdout. LayoutError when it fails and
    `check` is true (a `post` check's output counts whatever its exit status)."""
    proc = subprocess.run(
        ["/bin/sh", "-c", snippet],
        cwd=root,
        env=host_env(home, root),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    if check and proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise LayoutError(
            f"`{snippet}` exited {proc.returncode} in {root}: {err[-1] if err else 'no stderr'}"
        )
    return proc.stdout.decode(errors="replace")


def snapshot(root: Path, home: Path) -> None:
    """`git init -q && git add -A -f && git commit` with the parity identity."""
    run_shell(
        "git init -q && git add -A -f && "
        "git -c user.name=parity -c user.email=parity@example.invalid commit -qm snapshot",
        root,
        home,
    )


def lay_out(repo: Repository, tree: Path, root: Path, home: Path) -> None:
    """A fresh layout of `repo` (cached at `tree`) at `root`; `home` is an empty HOME."""
    plan = plan_for(repo)
    shutil.copytree(tree, root, symlinks=True)
    root.chmod(0o755)
    if plan.resolve_symlinks:
        resolve_symlinks(root)
    for step in plan.steps:
        run_shell(step, root, home)
    snapshot(root, home)
