"""Many `cloudrunner run` processes at once on one state directory and one audit log."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from cloudrunner.audit import verify_log
from tests.e2e.conftest import Deployment

pytestmark = pytest.mark.docker

PROCESSES = 20


def test_twenty_concurrent_runs_share_state_and_one_intact_chain(deployment: Deployment) -> None:
    deployment.answer(deployment.event("afterAgentResponse", text="hi"))  # the clone, once
    before = len(deployment.records())

    def one(n: int) -> subprocess.CompletedProcess[bytes]:
        if n % 2:
            payload = deployment.event("beforeShellExecution", command=f"rm -rf / #{n}")
        else:
            payload = deployment.event("stop", status="completed", loop_count=0)
        payload["generation_id"] = f"gen-{n}"
        return subprocess.run(
            [sys.executable, "-m", "cloudrunner", "run", *deployment.flags()],
            input=json.dumps(payload).encode(),
            capture_output=True,
            env=deployment.base_env(),
            timeout=600,
            check=False,
        )

    with ThreadPoolExecutor(PROCESSES) as pool:
        procs = list(pool.map(one, range(PROCESSES)))
    answers = []
    for proc in procs:
        assert proc.returncode == 0, proc.stderr.decode()
        answers.append(json.loads(proc.stdout))
    assert all(a["permission"] == "deny" for a in answers[1::2])
    # loop_limit 2 holds across processes: exactly two of the ten stops got a follow-up
    assert sum("followup_message" in a for a in answers[0::2]) == 2
    report = verify_log(deployment.audit_log)
    assert report.ok, report.problems
    records = deployment.records()
    decisions = [r for r in records[before:] if r["kind"] == "decision"]
    assert sorted(r["generation_id"] for r in decisions) == sorted(
        f"gen-{n}" for n in range(PROCESSES)
    )
    hooks = [r for r in records[before:] if r["kind"] == "hook"]
    assert len(hooks) == PROCESSES
    assert [r["seq"] for r in records] == list(range(len(records)))
