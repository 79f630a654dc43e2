"""cloudrunner's version, the one source of it, and the commit a build was made from.

`VERSION` below is the version of everything built from this tree: the package (hatchling
reads it, `[tool.hatch.version]` in pyproject.toml), the wheels and the .deb, the compiled
client `cloudrunner-hook` (client/build stamps it with `-ldflags -X`) and the images'
labels. Run as a script it prints it, for build scripts that should not import the package:

    python3 cloudrunner/version.py            # 0.1.0
    python3 cloudrunner/version.py --commit   # the commit, as `describe()` below finds it

The commit: a built wheel carries it in `cloudrunner/_build_info.py`, written by the build
hook (hatch_build.py); in a source checkout it is asked of git when wanted (`HEAD`, with
`+dirty` when tracked files differ from it); elsewhere it is "unknown".

Imported by the per-event client's `health`, so only the standard library's basics, and
nothing at import time beyond the constant.
"""

VERSION = "0.1.0"

UNKNOWN = "unknown"
#: hex digits of a commit id shown (git's --short=12)
COMMIT_LENGTH = 12


def commit() -> str:
    """The commit this code was built from, or "unknown"."""
    try:
        from cloudrunner._build_info import COMMIT  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return git_commit(_checkout()) or UNKNOWN
    return str(COMMIT)


def describe(program: str = "cloudrunner") -> str:
    """What `--version` prints: `cloudrunner 0.1.0 (commit 0123456789ab)`."""
    return f"{program} {VERSION} (commit {commit()})"


_identity: dict[str, str] = {}


def identity() -> dict[str, str]:
    """{"version": ..., "commit": ...}, found once (the daemon's health answer)."""
    if not _identity:
        _identity.update(version=VERSION, commit=commit())
    return dict(_identity)


def _checkout() -> str:
    """The directory above the package (a source checkout's root, when it is one)."""
    import os

    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def git_commit(root: str) -> str | None:
    """HEAD of the git checkout at `root` (only `root` itself, never a repository above it:
    a virtualenv inside someone's repository is not ours), `+dirty` when tracked files
    differ; None when `root` is not a checkout or git cannot say."""
    import os
    import subprocess

    if not (os.path.exists(os.path.join(root, ".git")) and os.path.isfile(
        os.path.join(root, "cloudrunner", "version.py")
    )):  # fmt: skip
        return None
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CEILING_DIRECTORIES"] = os.path.dirname(root)
    try:
        head = subprocess.run(
            ["git", "-C", root, "rev-parse", f"--short={COMMIT_LENGTH}", "HEAD"],
            capture_output=True, text=True, env=env, timeout=10, check=False,
        )  # fmt: skip
        if head.returncode != 0 or not head.stdout.strip():
            return None
        status = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, env=env, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    dirty = "+dirty" if status.returncode == 0 and status.stdout.strip() else ""
    return head.stdout.strip() + dirty


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--commit"]:
        # run as a script: this file's directory is sys.path[0], so no _build_info here
        print(git_commit(_checkout()) or UNKNOWN)
    elif sys.argv[1:]:
        sys.exit("usage: python3 cloudrunner/version.py [--commit]")
    else:
        print(VERSION)
