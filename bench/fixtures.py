"""What a run sets up: a git workspace with project hooks, enterprise and team hooks files,
a state directory and a settings file, all under one temporary directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomli_w

from bench.cases import EVENT
from cloudrunner.settings import Settings, load_settings
from cloudrunner.sources import RACY_NS


def worker_id() -> str:
    """The label on every container a run makes (CLOUDRUNNER_WORKER_ID, as for the worker)."""
    return os.environ.get("CLOUDRUNNER_WORKER_ID") or f"bench-{uuid.uuid4().hex[:8]}"


def hooks_document(commands: Sequence[str], event: str = EVENT) -> dict[str, Any]:
    return {"version": 1, "hooks": {event: [{"command": c, "timeout": 30} for c in commands]}}


class Scene:
    """One workspace and its settings; `close()` removes the directory."""

    def __init__(self, worker: str, *, runtime: str, isolation: str = "session") -> None:
        self.worker = worker
        self.runtime = runtime
        self.isolation = isolation
        self.root = Path(tempfile.mkdtemp(prefix="cloudrunner-bench-"))
        # hooks run as an unprivileged uid and must enter what is mounted for them
        self.root.chmod(0o755)
        self.workspace = self.root / "workspace"
        self.state = self.root / "state"
        self.enterprise = self.root / "enterprise" / "hooks.json"
        self.team = self.root / "team" / "hooks.json"
        self.config = self.root / "cloudrunner.toml"
        self.state.mkdir()
        self.workspace.mkdir()
        for directory in (self.workspace, self.enterprise.parent, self.team.parent):
            directory.mkdir(exist_ok=True)
            directory.chmod(0o755)
        self.set_hooks(project=["cat"])
        _git(self.workspace, "init", "-q", "-b", "main")
        _git(self.workspace, "add", "-A")
        _git(self.workspace, "commit", "-q", "-m", "bench workspace")
        self._write_config()
        self._written = time.time()

    def set_hooks(
        self,
        *,
        project: Sequence[str] = (),
        enterprise: Sequence[str] = (),
        team: Sequence[str] = (),
    ) -> None:
        """Replace the hooks of each source (the worker reloads them on the next event)."""
        cursor = self.workspace / ".cursor"
        cursor.mkdir(exist_ok=True)
        cursor.chmod(0o755)
        for path, commands in (
            (cursor / "hooks.json", project),
            (self.enterprise, enterprise),
            (self.team, team),
        ):
            path.write_text(json.dumps(hooks_document(commands), indent=2) + "\n")
            path.chmod(0o644)
        self._written = time.time()

    def settle(self) -> None:
        """Wait until the files this scene wrote are older than the window in which the
        worker reads them again on every event (`sources.RACY_NS`: a change within one
        timer tick could go unseen otherwise), so what is measured is the steady state of
        a workspace whose hooks files and HEAD are not being rewritten."""
        left = self._written + RACY_NS / 1e9 + 0.05 - time.time()
        if left > 0:
            time.sleep(left)

    def settings_data(self) -> dict[str, Any]:
        return {
            "state_dir": str(self.state),
            "worker_id": self.worker,
            "sources": {"enterprise_hooks": str(self.enterprise), "team_hooks": str(self.team)},
            "workspace": {"path": str(self.workspace)},
            "sandbox": {"isolation": self.isolation, "runtime": self.runtime},
            "server": {"socket": str(self.state / "cloudrunner.sock")},
        }

    def _write_config(self) -> None:
        self.config.write_text(tomli_w.dumps(self.settings_data()))

    def settings(self) -> Settings:
        return load_settings(self.config, environ={})

    @property
    def socket(self) -> Path:
        return self.state / "cloudrunner.sock"

    def env(self) -> dict[str, str]:
        """The environment of a `cloudrunner` process: the settings file, nothing inherited."""
        keep = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
        return {**keep, "CLOUDRUNNER_CONFIG": str(self.config)}

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _git(cwd: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
