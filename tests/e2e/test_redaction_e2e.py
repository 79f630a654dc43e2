"""Secrets and record size end to end: a real `cloudrunner run`, real hook containers that
echo their input (to stderr, and to stdout as their answer), the audit log
and the recorded event stream searched for every secret of the corpus
(tests/data/secret_shapes.toml), then `audit verify` and `replay` of what was recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon_process import daemon_process, run_client
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import committed_repo

pytestmark = pytest.mark.docker

CORPUS = tomllib.loads(
    (Path(__file__).resolve().parents[1] / "data" / "secret_shapes.toml").read_text()
)
SECRETS = [entry["secret"] for entry in CORPUS["shape"]] + CORPUS["structured"]["secrets"]

HOOKS = {
    "version": 1,
    "hooks": {
        "preToolUse": [
            # prints what it was given to stderr, then allows
            {"command": 'cat >&2; echo \'{"permission": "allow"}\''},
            # prints what it was given as its answer (its unknown fields are ignored)
            {"command": "cat"},
        ],
        "beforeShellExecution": [
            {"command": 'cat >/dev/null; echo \'{"permission": "allow"}\'', "matcher": "echo"}
        ],
    },
}


@dataclass
class Setup:
    root: Path
    workspace: Path
    state: Path
    config: Path
    worker_id: str

    @property
    def audit_log(self) -> Path:
        return self.state / "audit.log"

    @property
    def stream(self) -> Path:
        return self.root / "recorded.jsonl"

    def cli(
        self, *args: str, data: bytes = b"", env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
        return subprocess.run(
            [sys.executable, "-m", "cloudrunner", *args],
            input=data,
            capture_output=True,
            env={**keep, "CLOUDRUNNER_WORKER_ID": self.worker_id, **(env or {})},
            timeout=600,
            check=False,
        )

    def run(
        self, payload: dict[str, Any], env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        return self.cli(
            "run", "--config", str(self.config), "--workspace", str(self.workspace),
            "--state-dir", str(self.state), "--audit-log", str(self.audit_log),
            "--isolation", "hook", "--record", str(self.stream),
            data=json.dumps(payload).encode(), env=env,
        )  # fmt: skip

    def event(self, name: str, **fields: Any) -> dict[str, Any]:
        return {
            "conversation_id": "conv-redact",
            "generation_id": f"gen-{name}",
            "hook_event_name": name,
            "cursor_version": "1.7.0",
            "workspace_roots": [str(self.workspace)],
            **fields,
        }


@pytest.fixture
def setup(tmp_path: Path, docker_tracker: DockerTracker) -> Setup:
    tmp_path.chmod(0o755)
    workspace = tmp_path / "repo"
    (workspace / ".cursor").mkdir(parents=True)
    (workspace / ".cursor" / "hooks.json").write_text(json.dumps(HOOKS, indent=2))
    committed_repo(workspace, "hooks")
    # the hooks run as an unprivileged uid and the gate wants a writable workspace
    for path in [workspace, *workspace.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    config = tmp_path / "settings.toml"
    config.write_text("[audit]\nexcerpt_bytes = 262144\n")
    return Setup(tmp_path, workspace, tmp_path / "state", config, docker_tracker.worker_id)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _assert_no_secret(path: Path) -> list[dict[str, Any]]:
    raw = path.read_text()
    entries = [json.loads(line) for line in raw.splitlines() if line.strip()]
    decoded = "\n".join(s for entry in entries for s in _strings(entry))
    for secret in SECRETS:
        assert secret not in raw, f"{secret} in {path}"
        assert secret not in decoded, f"{secret} in {path} (decoded)"
    return entries


def _corpus_event(setup: Setup) -> dict[str, Any]:
    texts = [entry["text"] for entry in CORPUS["shape"]]
    tool_input = {
        **CORPUS["structured"]["tool_input"],
        "command": " && ".join(t.strip().replace("\n", " ") for t in texts[:12]),
        "notes": texts,
    }
    return setup.event("preToolUse", tool_name="Shell", tool_input=tool_input)


def test_no_corpus_secret_reaches_the_audit_log_or_the_recorded_stream(setup: Setup) -> None:
    payload = _corpus_event(setup)
    proc = setup.run(payload)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout) == {"permission": "allow"}

    records = _assert_no_secret(setup.audit_log)
    hooks = [r for r in records if r["kind"] == "hook"]
    assert [h["outcome"] for h in hooks] == ["ok", "ok"]
    # the echo is there, whole, with its secrets blanked: redaction did not just drop it
    echoed = hooks[0]["stderr_excerpt"]
    assert '"tool_name": "Shell"' in echoed or '"tool_name":"Shell"' in echoed
    assert "truncated" not in echoed and echoed.count("[REDACTED]") >= len(SECRETS)
    assert "[REDACTED]" in hooks[1]["stdout_excerpt"]
    (decision,) = [r for r in records if r["kind"] == "decision"]
    assert decision["payload"]["tool_input"]["password"] == "[REDACTED]"
    assert decision["payload"]["tool_input"]["env"]["MODE"] == "prod"

    (entry,) = _assert_no_secret(setup.stream)
    assert "/tool_input/password" in entry["altered"]
    assert entry["payload"]["tool_input"]["env"] == {"DB_PASSWORD": "[REDACTED]", "MODE": "prod"}

    verify = setup.cli("audit", "verify", str(setup.audit_log))
    assert verify.returncode == 0, verify.stdout.decode() + verify.stderr.decode()

    # the recorded stream replays: the hooks get the (redacted) payload it kept
    replay = setup.cli(
        "replay", str(setup.stream), "--workspace", str(setup.workspace),
        "--config", str(setup.config), "--isolation", "hook",
        "--state-dir", str(setup.root / "replay-state"), "--format", "json",
    )  # fmt: skip
    assert replay.returncode == 0, replay.stdout.decode() + replay.stderr.decode()
    report = json.loads(replay.stdout)
    assert [e["status"] for e in report["events"]] == ["match"]
    _assert_no_secret(setup.root / "replay-state" / "audit.log")


def test_no_corpus_secret_reaches_the_daemons_log_or_stream(setup: Setup) -> None:
    daemon = daemon_process(
        [
            "--config", str(setup.config), "--workspace", str(setup.workspace),
            "--state-dir", str(setup.state), "--audit-log", str(setup.audit_log),
            "--isolation", "session", "--record", str(setup.stream),
        ],
        state=setup.state, worker_id=setup.worker_id,
    ).start()  # fmt: skip
    try:
        env = {"CLOUDRUNNER_SOCKET": str(daemon.socket_path)}
        for _ in range(2):  # a cold and a warm sandbox
            proc = run_client(["hook", "preToolUse"], _corpus_event(setup), env=env)
            assert proc.returncode == 0, proc.stderr.decode()
            assert json.loads(proc.stdout) == {"permission": "allow"}
    finally:
        assert daemon.stop() == 0
    records = _assert_no_secret(setup.audit_log)
    hooks = [r for r in records if r["kind"] == "hook"]
    assert len(hooks) == 4 and all("[REDACTED]" in h["stderr_excerpt"] for h in hooks[::2])
    assert len(_assert_no_secret(setup.stream)) == 2
    verify = setup.cli("audit", "verify", str(setup.audit_log))
    assert verify.returncode == 0, verify.stdout.decode()


def test_a_large_payload_is_stored_once(setup: Setup) -> None:
    # A 1.5 MB command the matcher quotes, and a 1 MB conversation id copied into every
    # record: before the bound, the log held each several times over.
    command = "echo " + "x" * 1_500_000
    payload = setup.event("beforeShellExecution", command=command, cwd=str(setup.workspace))
    payload["conversation_id"] = "c" * 1_000_000
    data_size = len(json.dumps(payload))
    proc = setup.run(payload, env={"CLOUDRUNNER_MAX_PAYLOAD_BYTES": str(4 * data_size)})
    assert proc.returncode == 0, proc.stderr.decode()
    raw = setup.audit_log.read_text()
    assert raw.count(command) == 1
    assert raw.count("c" * 1_000_000) == 1
    assert len(raw.encode()) < data_size + 64 * 1024
    records = [json.loads(line) for line in raw.splitlines()]
    (hook,) = [r for r in records if r["kind"] == "hook"]
    assert hook["conversation_id"].startswith("c" * 256 + "…[cut: 1000000 bytes, sha256 ")
    assert "…[cut: " in hook["match_reason"]
    verify = setup.cli("audit", "verify", str(setup.audit_log))
    assert verify.returncode == 0, verify.stdout.decode()
    query = setup.cli("audit", "query", str(setup.audit_log), "--kind", "hook", "--format", "json")
    assert query.returncode == 0 and json.loads(query.stdout)["kind"] == "hook"
    stats = setup.cli("audit", "stats", str(setup.audit_log), "--format", "json")
    assert stats.returncode == 0 and json.loads(stats.stdout)["records"] == len(records)
