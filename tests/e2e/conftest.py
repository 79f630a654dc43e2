"""End-to-end fixtures: a real repository with project hooks, an enterprise hooks directory,
and a way to call `cloudrunner run` as a separate process, as a cloud agent VM does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import committed_repo, git

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass
class Deployment:
    """A bare origin of the demo repository, an enterprise directory, a state directory."""

    root: Path
    origin: Path
    enterprise: Path
    workspace: Path
    state: Path
    worker_id: str
    isolation: str = "hook"
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def audit_log(self) -> Path:
        return self.state / "audit.log"

    def flags(self) -> list[str]:
        return [
            "--repo", self.origin.as_uri(), "--ref", "main", "--workspace", str(self.workspace),
            "--enterprise-hooks", str(self.enterprise / "hooks.json"),
            "--state-dir", str(self.state), "--audit-log", str(self.audit_log),
            "--isolation", self.isolation,
        ]  # fmt: skip

    def event(self, name: str, **fields: Any) -> dict[str, Any]:
        return {
            "conversation_id": "conv-1",
            "generation_id": f"gen-{name}",
            "model": "test-model",
            "hook_event_name": name,
            "cursor_version": "1.7.0",
            "workspace_roots": [str(self.workspace)],
            "user_email": "dev@example.invalid",
            "transcript_path": None,
            **fields,
        }

    def shell_event(self, command: str = "ls", **fields: Any) -> dict[str, Any]:
        """A beforeShellExecution event of `command`, run in the workspace."""
        return self.event(
            "beforeShellExecution", command=command, cwd=str(self.workspace), **fields
        )

    def run(
        self,
        payload: dict[str, Any] | bytes,
        *args: str,
        flags: Sequence[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        chosen = self.flags() if flags is None else list(flags)
        return subprocess.run(
            [sys.executable, "-m", "cloudrunner", "run", *chosen, *args],
            input=data,
            capture_output=True,
            env={**self.base_env(), **(env or {})},
            timeout=300,
            check=False,
        )  # fmt: skip

    def base_env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
        return {**keep, "CLOUDRUNNER_WORKER_ID": self.worker_id, **self.extra_env}

    def answer(self, payload: dict[str, Any], *args: str) -> dict[str, Any]:
        proc = self.run(payload, *args)
        assert proc.returncode == 0, proc.stderr.decode()
        value = json.loads(proc.stdout)
        assert isinstance(value, dict)
        return value

    def records(self, *, missing_ok: bool = False) -> list[dict[str, Any]]:
        """Every intact record (a torn line, acknowledged by a later record, is left out);
        none when `missing_ok` and there is no log yet."""
        if missing_ok and not self.audit_log.exists():
            return []
        out = []
        for line in self.audit_log.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


def bare_origin(base: Path, src: Path, message: str = "demo") -> Path:
    """`src` committed on main and cloned bare to `base/origin.git` (the deployment's repo)."""
    committed_repo(src, message)
    origin = base / "origin.git"
    git(base, "clone", "-q", "--bare", str(src), str(origin))
    return origin


def make_deployment(base: Path, worker_id: str) -> Deployment:
    src = base / "src"
    shutil.copytree(EXAMPLES / "demo-repo", src)
    origin = bare_origin(base, src)
    enterprise = base / "enterprise"
    shutil.copytree(EXAMPLES / "enterprise", enterprise)
    # Everything the hook containers mount must be reachable for the unprivileged hook uid.
    for path in (base, enterprise):
        path.chmod(0o755)
    return Deployment(base, origin, enterprise, base / "workspace", base / "state", worker_id)


def cloned_deployment(tmp_path: Path, worker_id: str, isolation: str = "hook") -> Deployment:
    """The demo deployment with its workspace cloned by a first event."""
    tmp_path.chmod(0o755)
    deployed = make_deployment(tmp_path, worker_id)
    deployed.isolation = isolation
    deployed.answer(deployed.event("stop", status="aborted"))
    return deployed


@pytest.fixture(params=["hook", "session"])
def deployment(
    request: pytest.FixtureRequest, tmp_path: Path, docker_tracker: DockerTracker
) -> Deployment:
    """The deployment, once per isolation mode."""
    tmp_path.chmod(0o755)
    deployed = make_deployment(tmp_path, docker_tracker.worker_id)
    deployed.isolation = request.param
    return deployed
