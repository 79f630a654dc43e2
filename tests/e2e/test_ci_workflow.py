"""The CI guide's workflow (examples/ci/hook-tests.yml) runs: its jobs in `needs` order, each
job's steps in order on a fresh workspace, against a real git repository made from the demo
repository, through real containers. There is no GitHub here (and `act` pulls runner images
from a registry), so the few actions it uses are played by this test:

- `actions/checkout`: a clone of the demo repository (the hooks repository under test), or,
  with `repository:`, a clone of this cloudrunner checkout into `path:`;
- `actions/setup-python`: a fresh virtual environment of this interpreter's Python, first on
  the job's PATH (in place of this checkout's .venv), so the workflow's own `install` step
  installs cloudrunner into it from the checked-out source and every later step runs that;
- `actions/cache` and `actions/cache/restore`: a folder per key, restored before the job's
  later steps and, for `actions/cache` on a miss, saved after the job succeeds;
- `sudo` and `apt-get`: the test runs as root with debootstrap installed: `sudo` runs the
  command, `apt-get install` checks that the packages are there.

Every `run:` step is run with bash, as GitHub runs it, with `GITHUB_OUTPUT`, `GITHUB_SHA`
and the workflow's `env`; a `${{ ... }}` expression this test cannot evaluate fails it."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.doc_examples import ROOT
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import committed_repo, git
from tests.unit.test_ci_files import check_call, cloudrunner_calls

pytestmark = pytest.mark.docker

WORKFLOW = ROOT / "examples" / "ci" / "hook-tests.yml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
SHIMS = {
    "sudo": '#!/bin/sh\nexec "$@"\n',
    "apt-get": (
        "#!/bin/sh\n"
        '[ "$1" = install ] || { echo "apt-get $1: not played by the test" >&2; exit 1; }\n'
        "shift\n"
        'for p in "$@"; do case "$p" in -*) ;; *) dpkg -s "$p" >/dev/null || exit 1 ;; esac; done\n'
    ),
}


def load_workflow() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def job_order(jobs: dict[str, Any]) -> list[str]:
    order: list[str] = []
    while len(order) < len(jobs):
        ready = [
            name
            for name, job in jobs.items()
            if name not in order and all(n in order for n in _needs(job))
        ]
        assert ready, f"the jobs' needs form a cycle: {jobs.keys()}"
        order.extend(ready)
    return order


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs", [])
    return [needs] if isinstance(needs, str) else list(needs)


class Run:
    """One workflow run: its cache, job outputs, and the repositories it checks out."""

    def __init__(self, tmp: Path, hooks_repo: Path, env: dict[str, str]) -> None:
        self.tmp = tmp
        self.hooks_repo = hooks_repo
        self.env = env
        self.cache = tmp / "cache"
        self.job_outputs: dict[str, dict[str, str]] = {}
        self.sha = git(hooks_repo, "rev-parse", "HEAD")

    def evaluate(self, text: str, steps: dict[str, dict[str, str]]) -> str:
        def value(match: re.Match[str]) -> str:
            expression = match.group(1)
            parts = expression.split(".")
            if expression.startswith("vars.CLOUDRUNNER_"):
                return {"REPOSITORY": "cloudrunner", "REF": "HEAD"}[parts[1][len("CLOUDRUNNER_") :]]
            if parts[0] == "env" and len(parts) == 2:
                return self.env[parts[1]]
            if parts[0] == "steps" and parts[2] == "outputs":
                return steps.get(parts[1], {}).get(parts[3], "")
            if parts[0] == "needs" and parts[2] == "outputs":
                return self.job_outputs[parts[1]][parts[3]]
            if expression == "github.sha":
                return self.sha
            raise AssertionError(f"an expression this test does not play: {expression!r}")

        return EXPRESSION.sub(value, str(text))

    def condition(self, text: str | None, steps: dict[str, dict[str, str]]) -> bool:
        if text is None:
            return True
        match = re.fullmatch(r"(.+?)\s*(==|!=)\s*'([^']*)'", text.strip())
        assert match, f"a condition this test does not play: {text!r}"
        left = self.evaluate("${{ " + match.group(1) + " }}", steps)
        return (left == match.group(3)) == (match.group(2) == "==")

    def fresh_python(self, into: Path) -> None:
        """A new virtual environment of this interpreter's Python, with pip and nothing
        else: made once per run and copied for each job (what pip then installs in a copy
        gets that copy's paths)."""
        template = self.tmp / "fresh-python"
        if not template.is_dir():
            subprocess.run([sys.executable, "-m", "venv", str(template)], check=True)
        shutil.copytree(template, into, symlinks=True)

    def job(self, name: str, job: dict[str, Any]) -> list[str]:
        """Run one job's steps; return the names of the steps run, in order."""
        workspace = self.tmp / name / "workspace"
        workspace.parent.mkdir(parents=True)
        workspace.mkdir()
        outputs_file = self.tmp / name / "output"
        steps: dict[str, dict[str, str]] = {}
        ran: list[str] = []
        saves: list[tuple[Path, Path]] = []
        env = dict(self.env)
        for number, step in enumerate(job["steps"]):
            label = step.get("name") or step.get("uses") or step.get("id") or f"#{number}"
            if not self.condition(step.get("if"), steps):
                continue
            inputs = {k: self.evaluate(v, steps) for k, v in (step.get("with") or {}).items()}
            uses = step.get("uses", "")
            if uses.startswith("actions/checkout@"):
                if "repository" in inputs:
                    source, into = ROOT, workspace / inputs["path"]
                else:
                    source, into = self.hooks_repo, workspace
                subprocess.run(["git", "clone", "-q", str(source), str(into)], check=True)
            elif uses.startswith("actions/setup-python@"):
                python = self.tmp / name / "python"
                self.fresh_python(python)
                rest = [p for p in env["PATH"].split(":") if p != str(ROOT / ".venv" / "bin")]
                env["PATH"] = ":".join([str(python / "bin"), *rest])
            elif uses.startswith(("actions/cache@", "actions/cache/restore@")):
                target, stored = Path(inputs["path"]), self.cache / inputs["key"]
                hit = stored.is_dir()
                if hit:
                    shutil.copytree(stored, target, dirs_exist_ok=True)
                elif inputs.get("fail-on-cache-miss") == "true":
                    raise AssertionError(f"{name}: cache miss for {inputs['key']}")
                elif uses.startswith("actions/cache@"):
                    saves.append((target, stored))
                if "id" in step:
                    steps[step["id"]] = {"cache-hit": "true" if hit else "false"}
            elif "run" in step:
                outputs_file.write_text("")
                proc = subprocess.run(
                    ["bash", "-eo", "pipefail", "-c", self.evaluate(step["run"], steps)],
                    cwd=workspace,
                    env={**env, "GITHUB_OUTPUT": str(outputs_file), "GITHUB_SHA": self.sha,
                         "GITHUB_WORKSPACE": str(workspace)},
                    capture_output=True, text=True, timeout=900,
                )  # fmt: skip
                assert proc.returncode == 0, (
                    f"{name}: step {label!r} failed ({proc.returncode}):\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
                )
                if "id" in step:
                    lines = outputs_file.read_text().splitlines()
                    steps[step["id"]] = dict(line.split("=", 1) for line in lines if "=" in line)
            else:
                raise AssertionError(f"{name}: a step this test does not play: {step}")
            ran.append(label)
        for target, stored in saves:  # post-job: the cache is saved when the job succeeded
            shutil.copytree(target, stored)
        self.job_outputs[name] = {
            k: self.evaluate(v, steps) for k, v in job.get("outputs", {}).items()
        }
        return ran


def test_every_cloudrunner_call_in_the_workflow_exists() -> None:
    for job in load_workflow()["jobs"].values():
        for step in job["steps"]:
            for call in cloudrunner_calls(step.get("run", "")):
                check_call(call)


def test_the_workflow_runs_its_jobs_in_order_with_the_image_cached_between_them(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    hooks_repo = tmp_path / "hooks-repo"
    shutil.copytree(ROOT / "examples" / "demo-repo", hooks_repo)
    committed_repo(hooks_repo, "hooks")
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, text in SHIMS.items():
        (shims / name).write_text(text)
        (shims / name).chmod(stat.S_IRWXU)
    workflow = load_workflow()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CLOUDRUNNER_", "GITHUB_"))},
        **{k: str(v) for k, v in workflow.get("env", {}).items()},
        "IMAGE_CACHE": str(tmp_path / "image-cache"),  # not /tmp: this run's own
        "PATH": f"{shims}:{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
        "CLOUDRUNNER_WORKER_ID": docker_tracker.worker_id,
        "TMPDIR": str(tmp_path),
    }
    run = Run(tmp_path / "run", hooks_repo, env)
    run.tmp.mkdir()
    jobs = workflow["jobs"]
    assert job_order(jobs) == ["image", "hook-tests"]
    first = run.job("image", jobs["image"])
    assert "Build the hook runtime image and save it to the cache" in first
    assert (run.cache / run.job_outputs["image"]["key"] / "hook-runtime.tar").is_file()
    tests = run.job("hook-tests", jobs["hook-tests"])
    assert tests[-2:] == ["Check the hooks as a cloud agent loads them",
                          "Replay the hook tests at this commit"]  # fmt: skip
    # a second run of the image job finds the image in the cache and builds nothing
    shutil.rmtree(run.tmp / "image")
    shutil.rmtree(tmp_path / "image-cache")
    again = run.job("image", jobs["image"])
    assert "Build the hook runtime image and save it to the cache" not in again
