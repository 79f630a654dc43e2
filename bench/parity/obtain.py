"""`python -m bench.parity.obtain CACHE_DIR --parity DIR [--source TEMPLATE] [--only NAME]`:
each repository of the parity data set at its commit, as a plain tree under CACHE_DIR.

The cache must be outside the project: the repositories are third-party code (several with
no licence) and only ever used for local testing. Per repository it writes
`CACHE_DIR/repos/NAME/` (the commit's files, modes and symlinks as committed, no .git, files
over 300 kB left out as when the bare answers were made) and `CACHE_DIR/repos/NAME.json`
(where it came from, what was left out). A repository or commit that cannot be had is
written to `CACHE_DIR/missing.json` with the reason; the runner skips it with that reason.

`--source` says where to get a repository: a URL or a local git directory, with `{repo}`
(owner/name), `{owner}` and `{name}` filled in; default `https://github.com/{repo}.git`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.parity.cases import CASES, MANIFEST, DataSetError, Repository, load

DEFAULT_SOURCE = "https://github.com/{repo}.git"
#: the bare answers were made without files over this size (README of the data set)
MAX_FILE_BYTES = 300 * 1024
MISSING = "missing.json"


class ObtainError(Exception):
    pass


def repos_dir(cache: Path) -> Path:
    return cache / "repos"


def tree_of(cache: Path, name: str) -> Path:
    return repos_dir(cache) / name


def source_for(template: str, repo: Repository) -> str:
    return template.format(repo=repo.repo, owner=repo.owner, name=repo.short)


def inside(path: Path, project: Path) -> bool:
    try:
        path.resolve().relative_to(project.resolve())
    except ValueError:
        return False
    return True


def _git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=False)


def absent_blobs(git_dir: Path, commit: str) -> list[str]:
    """Paths of the commit whose blobs the source does not hold (a partial mirror leaves out
    its largest files; `git ls-tree -l` then shows no size)."""
    listing = _git("--git-dir", str(git_dir), "ls-tree", "-r", "-l", "-z", commit)
    if listing.returncode != 0:
        raise ObtainError(f"cannot list {commit} in {git_dir}: {listing.stderr.decode()[-300:]}")
    out = []
    for entry in listing.stdout.split(b"\0"):
        meta, _, path = entry.partition(b"\t")
        fields = meta.split()
        if len(fields) == 4 and fields[1] == b"blob" and not fields[3].isdigit():
            out.append(path.decode("utf-8", "surrogateescape"))
    return out


def _archive(git_dir: Path, commit: str, dest: Path) -> list[str]:
    """The commit's tree into `dest` through `git archive | tar -x` (keeps modes, symlinks);
    the paths left out because the source does not hold their blobs."""
    check = _git("--git-dir", str(git_dir), "cat-file", "-t", commit)
    if check.returncode != 0 or check.stdout.strip() != b"commit":
        raise ObtainError(f"commit {commit} is not in {git_dir}")
    absent = absent_blobs(git_dir, commit)
    dest.mkdir(parents=True)
    excludes = [f":(exclude,literal){path}" for path in absent]
    archive = subprocess.Popen(
        [
            "git",
            "-c",
            "tar.umask=0022",
            "--git-dir",
            str(git_dir),
            "archive",
            "--format=tar",
            commit,
            *(["--", ".", *excludes] if excludes else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert archive.stdout is not None
    untar = subprocess.run(
        ["tar", "-x", "-p", "-f", "-", "-C", str(dest)],
        stdin=archive.stdout,
        capture_output=True,
        check=False,
    )
    archive.stdout.close()
    err = archive.stderr.read() if archive.stderr else b""
    if archive.wait() != 0 or untar.returncode != 0:
        raise ObtainError(f"git archive {commit} failed: {(err or untar.stderr).decode()[-300:]}")
    return absent


def _fetch(url: str, commit: str, scratch: Path) -> Path:
    """A bare repository holding `commit`, fetched from a URL (only that commit)."""
    git_dir = scratch / "fetch.git"
    _git("init", "-q", "--bare", str(git_dir))
    got = _git("--git-dir", str(git_dir), "fetch", "-q", "--depth", "1", url, commit)
    if got.returncode != 0:
        raise ObtainError(f"cannot fetch {commit} from {url}: {got.stderr.decode().strip()[-300:]}")
    return git_dir


def drop_large(root: Path, limit: int = MAX_FILE_BYTES) -> list[str]:
    """Remove regular files over `limit` bytes; their paths, relative to `root`."""
    dropped = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            if path.stat().st_size > limit:
                dropped.append(str(path.relative_to(root)))
                path.unlink()
    return sorted(dropped)


def obtain(repo: Repository, cache: Path, template: str) -> dict[str, object]:
    dest = tree_of(cache, repo.name)
    source = source_for(template, repo)
    with tempfile.TemporaryDirectory(prefix="parity-obtain-") as scratch:
        staging = Path(scratch) / "tree"
        local = Path(source)
        if local.is_dir():  # a bare repository, or a work tree's .git
            git_dir = local / ".git" if (local / ".git").is_dir() else local
        else:
            git_dir = _fetch(source, repo.commit, Path(scratch))
        absent = _archive(git_dir, repo.commit, staging)
        dropped = drop_large(staging)
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), dest)
    info: dict[str, object] = {
        "name": repo.name,
        "repo": repo.repo,
        "commit": repo.commit,
        "source": source,
        "dropped_over_300kB": dropped,
        #: blobs the source does not hold (a partial mirror's largest files): left out too
        "absent_in_source": absent,
    }
    (dest.parent / f"{repo.name}.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.parity.obtain",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("cache", type=Path, help="the cache directory (outside the project)")
    parser.add_argument(
        "--parity",
        type=Path,
        required=True,
        help="the data set's directory (MANIFEST.tsv, cases.json)",
    )
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="URL or git dir template")
    parser.add_argument("--only", action="append", default=[], help="only this repository")
    args = parser.parse_args(argv)
    project = Path(__file__).resolve().parents[2]
    cache: Path = args.cache
    if inside(cache, project):
        print(
            f"parity: {cache} is inside the project {project}; the repositories are "
            "third-party code: give a cache directory outside it",
            file=sys.stderr,
        )
        return 2
    try:
        repos = load(args.parity)
    except DataSetError as exc:
        print(f"parity: {exc}", file=sys.stderr)
        return 2
    cache.mkdir(parents=True, exist_ok=True)
    for name in (MANIFEST, CASES):
        shutil.copyfile(args.parity / name, cache / name)
    missing_path = cache / MISSING
    try:
        missing: dict[str, str] = json.loads(missing_path.read_text())
    except (FileNotFoundError, ValueError):
        missing = {}
    chosen = [r for r in repos if not args.only or r.name in args.only]
    unknown = set(args.only) - {r.name for r in repos}
    if unknown:
        print(
            f"parity: no repository named {', '.join(sorted(unknown))} in the data set",
            file=sys.stderr,
        )
        return 2
    failures = 0
    for repo in chosen:
        try:
            info = obtain(repo, cache, args.source)
        except (ObtainError, OSError) as exc:
            failures += 1
            missing[repo.name] = str(exc)
            print(f"{repo.name}: NOT obtained: {exc}", file=sys.stderr)
            continue
        missing.pop(repo.name, None)
        dropped, absent = info["dropped_over_300kB"], info["absent_in_source"]
        print(
            f"{repo.name}: {repo.commit[:12]} from {info['source']}"
            + (
                f" (left out: {', '.join(dropped)})"
                if isinstance(dropped, list) and dropped
                else ""
            )
            + (
                f" (absent in the source, left out: {', '.join(absent)})"
                if isinstance(absent, list) and absent
                else ""
            )
        )
    missing_path.write_text(json.dumps(missing, indent=2, sort_keys=True) + "\n")
    print(f"{len(chosen) - failures} of {len(chosen)} repositories in {repos_dir(cache)}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
