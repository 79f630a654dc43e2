"""`python -m bench.parity CACHE_DIR [--only NAME] [--event ID] [--out DIR] [--repeat N]`

Runs every event of the parity data set (CACHE_DIR/cases.json, the repositories under
CACHE_DIR/repos, see `python -m bench.parity.obtain`) bare and through `cloudrunner serve` +
`cloudrunner hook`, and prints one row per event: same answer, same hook exits (from the
daemon's audit records), same `post` output, whether the bare run on this host confirms the
recorded answer, the client/bare time ratio, and the cause of each difference. The summary
line and the JSON (`--out DIR`, default ./parity-results) follow. Differences are results:
the exit status is 0 unless the run itself could not be made (2: usage, no cache, no
engine; 1: an event could not be run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import docker
import docker.errors

from bench.parity import report
from bench.parity.cases import DataSetError, Repository, load
from bench.parity.compare import Verdict
from bench.parity.layout import LayoutError, plan_for
from bench.parity.obtain import MISSING, inside, tree_of
from bench.parity.runner import Options, run_event
from cloudrunner.images import DEFAULT_RUNTIME_IMAGE

PROJECT = Path(__file__).resolve().parents[2]


def _fail(message: str) -> int:
    print(f"parity: {message}", file=sys.stderr)
    return 2


def skip_reason(repo: Repository, cache: Path, missing: dict[str, str]) -> str | None:
    if repo.name in missing:
        return f"not obtained: {missing[repo.name]}"
    if not tree_of(cache, repo.name).is_dir():
        return f"not in the cache ({tree_of(cache, repo.name)}); run python -m bench.parity.obtain"
    try:
        plan_for(repo)
    except LayoutError as exc:
        return str(exc)
    return None


def _engine(image: str) -> str | None:
    """None when the engine answers and has the image; else what is wrong."""
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # any failure to reach the engine
        return f"no Docker engine answers ({exc}); start it (bash scripts/docker-up)"
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return f"image {image} is missing; build it (cloudrunner images build)"
    finally:
        client.close()
    return None


def _leftovers(worker_id: str) -> int:
    """Remove containers this run's label still has (a daemon killed mid-event)."""
    try:
        client = docker.from_env(timeout=30)
        found = client.containers.list(
            all=True, filters={"label": f"cloudrunner.worker={worker_id}"}
        )
        for container in found:
            container.remove(force=True, v=True)
        client.close()
    except docker.errors.DockerException:
        return 0
    return len(found)


def _commit() -> str:
    proc = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.parity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("cache", type=Path, help="the parity cache (see bench.parity.obtain)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="only this repository (MANIFEST name; repeatable)",
    )
    parser.add_argument(
        "--event", action="append", default=[], metavar="ID", help="only this event id (repeatable)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("parity-results"),
        help="where parity.json goes (default ./parity-results)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="timed repeats per event, client and bare alternating (default 5)",
    )
    parser.add_argument("--runtime", default="runc", help="the sandbox runtime (runc, runsc)")
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="where layouts and daemon state go (default a new /tmp dir, removed after)",
    )
    parser.add_argument("--keep", action="store_true", help="keep each event's directory")
    parser.add_argument(
        "--client",
        choices=("installed", "isolated", "compiled"),
        default="installed",
        help="start the per-event client as installed (`cloudrunner hook`), isolated "
        "(`python -IS <path>/cloudrunner hook`), or compiled (`cloudrunner-hook hook`, built "
        "by scripts/setup beside it); default installed",
    )
    args = parser.parse_args(argv)
    cache: Path = args.cache
    if not (cache / "cases.json").is_file():
        return _fail(
            f"no parity cache at {cache} (no cases.json); fill it with "
            "python -m bench.parity.obtain CACHE_DIR --parity DIR"
        )
    if inside(cache, PROJECT):
        return _fail(f"{cache} is inside the project; the cache must live outside it")
    if args.repeat < 0:
        return _fail(f"--repeat must be 0 or more, not {args.repeat}")
    try:
        repos = load(cache)
    except DataSetError as exc:
        return _fail(str(exc))
    names = {r.name for r in repos}
    unknown = sorted(set(args.only) - names)
    if unknown:
        return _fail(f"no repository named {', '.join(unknown)} in {cache / 'cases.json'}")
    chosen = [r for r in repos if not args.only or r.name in args.only]
    if args.event:
        ids = {e.id for r in chosen for e in r.events}
        unknown = sorted(set(args.event) - ids)
        if unknown:
            return _fail(f"no event {', '.join(unknown)} in the chosen repositories")
    if args.work is not None and args.work.exists() and any(args.work.iterdir()):
        return _fail(f"--work {args.work} is not empty; give an empty or new directory")
    problem = _engine(DEFAULT_RUNTIME_IMAGE)
    if problem:
        return _fail(problem)
    try:
        missing: dict[str, str] = json.loads((cache / MISSING).read_text())
    except (OSError, ValueError):
        missing = {}
    worker_id = os.environ.get("CLOUDRUNNER_WORKER_ID") or f"parity-{uuid.uuid4().hex[:8]}"
    options = Options(
        worker_id=worker_id,
        runtime=args.runtime,
        repeat=args.repeat,
        keep=args.keep,
        client=args.client,
    )
    work = args.work or Path(tempfile.mkdtemp(prefix="parity-"))
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)
    started = time.time()
    verdicts: list[Verdict] = []
    number = 0
    try:
        for repo in chosen:
            reason = skip_reason(repo, cache, missing)
            for event in repo.events:
                if args.event and event.id not in args.event:
                    continue
                number += 1
                if reason:
                    verdicts.append(Verdict(repo.name, event.id, event.event, skipped=reason))
                    continue
                print(f"[{number}] {repo.name} {event.id}", file=sys.stderr, flush=True)
                verdicts.append(
                    run_event(
                        repo, event, tree_of(cache, repo.name), work / f"{number:02d}", options
                    )
                )
    finally:
        left = _leftovers(worker_id)
        if not args.keep and args.work is None:  # only the directory this run made
            shutil.rmtree(work, ignore_errors=True)
    summary = report.summarize(verdicts)
    print(report.render(verdicts))
    print()
    print(summary.line())
    if summary.causes:
        print("causes (events): " + "; ".join(f"{c} ({n})" for c, n in summary.causes.items()))
    document: dict[str, Any] = {
        "meta": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "wall_s": round(time.time() - started, 1),
            "host": platform.node(),
            "load_avg": os.getloadavg(),
            "commit": _commit(),
            "image": DEFAULT_RUNTIME_IMAGE,
            "runtime": args.runtime,
            "profile": options.profile,
            "repeat": args.repeat,
            "worker_id": worker_id,
            "leftover_containers_removed": left,
        },
        "summary": summary.to_dict(),
        "events": [report.verdict_dict(v) for v in verdicts],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "parity.json").write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    print(f"JSON: {args.out / 'parity.json'}", file=sys.stderr)
    return 1 if summary.errors else 0
