"""The shipped alerting rules against a real Prometheus scraping real daemons.

Debian's `prometheus` runs on loopback (scrapes and rule evaluations every second, its own
configuration and storage in the test's directory) and scrapes two `cloudrunner serve`
processes over TCP with their bearer token. The rules are a copy of
deploy/prometheus/cloudrunner.rules.yml with every `for:` set to 0 s, so that an alert
fires at the first evaluation that sees its condition: the promtool unit tests
(tests/unit/deploy/test_prometheus_rules.py) check the shipped durations. Things are broken
for real, and each alert is read from Prometheus's own API:

- daemon A's project hooks run in an image that is not on the engine: its hook ends as
  sandbox_error (CloudrunnerHookSandboxErrors) and it is not ready (CloudrunnerNotReady);
- an enterprise hook of A's takes 5.5 s (CloudrunnerSlowEvents), and a daemon session
  created through A's API reaches its server.max_sessions of 1 (CloudrunnerSessionsNearCap);
- daemon A is stopped (CloudrunnerDown), the agent's client answers two events by the fail
  policy into the spool, and A started again takes them (CloudrunnerFallbackAnswers);
- daemon B's DOCKER_HOST names a socket that does not exist (CloudrunnerEngineUnreachable,
  and not CloudrunnerNotReady, which leaves the engine's case to that alert), and its audit
  log lies under a regular file, so an event sent to it cannot be recorded
  (CloudrunnerAuditWriteFailures).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from deploygen import chart, grafana
from tests.support.daemon_process import daemon_process, run_client
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import guarded_repo
from tests.support.prometheus_server import PrometheusServer, free_port, rules_without_waits

pytestmark = pytest.mark.docker

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "cloudrunner.rules.yml"
MISSING_IMAGE = "cloudrunner/no-such-image:0"
#: an enterprise hook (the default image, which is there) that takes 5.5 s when asked to
SLOW_WHEN_ASKED = "input=$(cat); case \"$input\" in *slow*) sleep 5.5;; esac; echo '{}'"
ENTERPRISE_HOOKS = {"version": 1, "hooks": {"afterFileEdit": [{"command": SLOW_WHEN_ASKED}]}}


def _payload(workspace: Path, event: str, **fields: Any) -> dict[str, Any]:
    return {
        "conversation_id": "conv-prom",
        "generation_id": f"gen-{event}",
        "hook_event_name": event,
        "workspace_roots": [str(workspace)],
        **fields,
    }


def test_each_broken_thing_fires_its_alert_in_a_real_prometheus(
    tmp_path: Path, docker_tracker: DockerTracker
) -> None:
    tmp_path.chmod(0o755)
    workspace = guarded_repo(tmp_path / "repo")
    token = tmp_path / "token"
    token.write_text(secrets.token_hex(16) + "\n")
    config = tmp_path / "project-image-missing.toml"
    config.write_text(
        f'[server]\nmax_sessions = 1\n[sandbox.per_source.project]\nimage = "{MISSING_IMAGE}"\n'
    )
    enterprise = tmp_path / "enterprise"
    enterprise.mkdir()
    (enterprise / "hooks.json").write_text(json.dumps(ENTERPRISE_HOOKS))
    port_a, port_b = free_port(), free_port()
    a, b = f"127.0.0.1:{port_a}", f"127.0.0.1:{port_b}"
    state_a, state_b = tmp_path / "state-a", tmp_path / "state-b"
    flags_a = [
        "--config", str(config), "--workspace", str(workspace), "--state-dir", str(state_a),
        "--audit-log", str(state_a / "audit.log"), "--isolation", "session",
        "--enterprise-hooks", str(enterprise / "hooks.json"),
        "--listen", a, "--token-file", str(token),
    ]  # fmt: skip
    # B's audit log lies under a regular file: no record of B's can be written, even as root
    (tmp_path / "not-a-directory").write_text("")
    flags_b = [
        "--state-dir", str(state_b), "--enterprise-hooks", str(tmp_path / "none.json"),
        "--audit-log", str(tmp_path / "not-a-directory" / "audit.log"),
        "--listen", b, "--token-file", str(token),
    ]  # fmt: skip
    daemon_a = daemon_process(flags_a, state=state_a, worker_id=docker_tracker.worker_id)
    no_engine = {"DOCKER_HOST": f"unix://{tmp_path / 'no-engine' / 'docker.sock'}"}
    daemon_b = daemon_process(
        flags_b, state=state_b, worker_id=f"{docker_tracker.worker_id}-b", env=no_engine
    )
    prometheus = PrometheusServer(
        tmp_path / "prometheus", [a, b], token, rules_without_waits(RULES, tmp_path / "r.yml")
    )
    (tmp_path / "prometheus").mkdir()
    client_env = {"CLOUDRUNNER_SOCKET": str(daemon_a.socket_path)}
    started = time.time()
    try:
        daemon_a.start()
        daemon_b.start()
        prometheus.start()
        # both scraped with the token (a refused token would leave up at 0)
        prometheus.wait(
            lambda: len(prometheus.query('up{job="cloudrunner"} == 1')) == 2, "both targets up"
        )

        # B: no engine behind DOCKER_HOST; not-ready is left to the engine's alert
        engine = prometheus.wait_for_alert("CloudrunnerEngineUnreachable", instance=b)
        assert engine["labels"]["severity"] == "critical"
        assert "cannot reach its Docker engine" in engine["annotations"]["summary"]
        # A: the engine answers but the project image is missing
        prometheus.wait_for_alert("CloudrunnerNotReady", instance=a)
        assert prometheus.alerts("CloudrunnerNotReady", instance=b) == []
        assert prometheus.alerts("CloudrunnerEngineUnreachable", instance=a) == []

        # B cannot write its audit log: an event sent to it fails, and the failure is counted
        assert prometheus.alerts("CloudrunnerAuditWriteFailures") == []
        unrecorded = run_client(
            ["hook", "stop"], _payload(workspace, "stop", status="completed"),
            env={"CLOUDRUNNER_SOCKET": str(daemon_b.socket_path)},
        )  # fmt: skip
        said = unrecorded.stderr.decode()
        assert "its first audit record could not be written" in said, said
        audit = prometheus.wait_for_alert("CloudrunnerAuditWriteFailures", instance=b)
        assert audit["labels"]["severity"] == "critical"

        # A's project hook cannot run in its sandbox: a sandbox_error, seen rising from 0
        assert prometheus.alerts("CloudrunnerHookSandboxErrors") == []
        stop = run_client(
            ["hook", "stop"], _payload(workspace, "stop", status="completed"), env=client_env
        )
        assert stop.returncode == 0, stop.stderr.decode()
        hooks = [
            json.loads(line)
            for line in (state_a / "audit.log").read_text().splitlines()
            if '"kind":"hook"' in line
        ]
        assert [(r["source"], r["outcome"]) for r in hooks] == [("project", "sandbox_error")]
        sandbox = prometheus.wait_for_alert(
            "CloudrunnerHookSandboxErrors", instance=a, source="project"
        )
        assert sandbox["annotations"]["runbook_url"].endswith("#cloudrunnerhooksandboxerrors")

        # A's afterFileEdit: a quick event (its series starts), then one over 5 s
        assert prometheus.alerts("CloudrunnerSlowEvents") == []
        for name in ("quick.py", "slow.py"):
            edit = _payload(workspace, "afterFileEdit", file_path=str(workspace / name), edits=[])
            edited = run_client(["hook", "afterFileEdit"], edit, env=client_env)
            assert edited.returncode == 0, edited.stderr.decode()
        slow = prometheus.wait_for_alert("CloudrunnerSlowEvents", instance=a, event="afterFileEdit")
        assert float(slow["value"]) > 5

        # A's second daemon session reaches server.max_sessions = 1
        assert prometheus.alerts("CloudrunnerSessionsNearCap") == []
        created = daemon_a.call("POST", "/v1/sessions", {"workspace": str(workspace)})
        assert created.status == 201, created.body
        prometheus.wait_for_alert("CloudrunnerSessionsNearCap", instance=a)

        # A stopped: the scrape fails, and the client answers by the fail policy
        assert daemon_a.stop() == 0
        prometheus.wait_for_alert("CloudrunnerDown", instance=a)
        shell = _payload(workspace, "beforeShellExecution", command="ls", cwd=str(workspace))
        blocked = run_client(["hook", "beforeShellExecution"], shell, env=client_env)
        assert json.loads(blocked.stdout)["permission"] == "deny", blocked.stderr.decode()
        through = run_client(
            ["hook", "stop"], _payload(workspace, "stop", status="completed"), env=client_env
        )
        assert through.returncode == 0, through.stderr.decode()
        assert prometheus.alerts("CloudrunnerFallbackAnswers") == []

        # A again: it takes the spool, and the alert says how many events
        daemon_a.start()
        fallback = prometheus.wait_for_alert("CloudrunnerFallbackAnswers", instance=a)
        assert fallback["annotations"]["summary"].startswith("2 events on"), fallback
        by_outcome = {
            r["metric"]["outcome"]: float(r["value"][1])
            for r in prometheus.query(f'cloudrunner_fallback_events_total{{instance="{a}"}}')
        }
        assert by_outcome == {"blocked": 1.0, "allowed": 1.0, "invalid": 0.0}
        assert prometheus.alerts("CloudrunnerFallbackAnswers", instance=b) == []
        drawing = os.environ.get("CLOUDRUNNER_DASHBOARD_CHART")
        if drawing:  # the docs' picture of the dashboard: its queries over this run's data
            _draw(prometheus, started, Path(drawing))
    finally:
        prometheus.stop()
        for daemon in (daemon_a, daemon_b):
            if daemon.proc is not None and daemon.proc.poll() is None:
                daemon.stop()


def _draw(prometheus: PrometheusServer, start: float, path: Path) -> None:
    panels = chart.panels(grafana.build())

    def query_range(expr: str) -> list[tuple[dict[str, str], chart.Points]]:
        data = prometheus.api(
            "query_range", query=expr, start=f"{start:.3f}", end=f"{time.time():.3f}", step="1"
        )
        return [
            (series["metric"], [(float(t) - start, float(v)) for t, v in series["values"]])
            for series in data["result"]
        ]

    variables = {"job": "cloudrunner", "instance": ".*", "__rate_interval": "4s"}
    chart.fill(panels, query_range, variables)
    chart.write_chart(panels, path, title="deploy/grafana/cloudrunner.json over the alerts test")
