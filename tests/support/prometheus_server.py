"""Debian's `prometheus` as a real server for the end-to-end tests: on loopback, with its own
configuration, rules and storage in a directory of the test's, read through its HTTP API."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.support.ci import missing
from tests.support.waiting import wait_for

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rules_without_waits(source: Path, target: Path) -> Path:
    """A copy of the rules file at `source` whose alerts fire without their `for:` wait (the
    unit tests of the rules check the real durations)."""
    doc = yaml.safe_load(source.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                rule["for"] = "0s"
    target.write_text(yaml.safe_dump(doc, sort_keys=False))
    return target


@dataclass
class PrometheusServer:
    """One `prometheus` process scraping `targets` every second (job `job`)."""

    directory: Path
    targets: Sequence[str]
    token_file: Path
    rules: Path
    job: str = "cloudrunner"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> PrometheusServer:
        binary = shutil.which("prometheus")
        if binary is None:
            missing(
                "prometheus is not installed: it comes with Debian's prometheus package, "
                "which `bash scripts/setup` installs (apt-get install prometheus)"
            )
        self.port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "1s"},
            "rule_files": [str(self.rules)],
            "scrape_configs": [
                {
                    "job_name": self.job,
                    "authorization": {"type": "Bearer",
                                      "credentials_file": str(self.token_file)},
                    "static_configs": [{"targets": list(self.targets)}],
                }
            ],
        }  # fmt: skip
        config_file = self.directory / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        log = (self.directory / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [
                binary, f"--config.file={config_file}",
                f"--storage.tsdb.path={self.directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        )  # fmt: skip
        log.close()
        self.wait(lambda: self.get("/-/ready") is not None, "Prometheus to be ready", timeout_s)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        shutil.rmtree(self.directory / "data", ignore_errors=True)

    def get(self, path: str, **params: str) -> bytes | None:
        """The body of GET `path` on the server, None while it does not answer 200."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"http://127.0.0.1:{self.port}{path}{query}"
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                body: bytes = reply.read()
                return body
        except OSError:
            return None

    def api(self, path: str, **params: str) -> Any:
        body = self.get(f"/api/v1/{path}", **params)
        assert body is not None, f"Prometheus's /api/v1/{path} did not answer:\n{self.log()}"
        doc = json.loads(body)
        assert doc["status"] == "success", doc
        return doc["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector `expr` gives now."""
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def alerts(self, name: str, **labels: str) -> list[dict[str, Any]]:
        """The alerts named `name` with `labels`, pending or firing, from /api/v1/alerts."""
        return [
            alert
            for alert in self.api("alerts")["alerts"]
            if alert["labels"].get("alertname") == name
            and all(alert["labels"].get(k) == v for k, v in labels.items())
        ]

    def wait_for_alert(self, name: str, timeout_s: float = 30.0, **labels: str) -> dict[str, Any]:
        """The first alert `name{labels}` that is pending or firing; fails after the timeout."""
        found = self.wait(
            lambda: next(iter(self.alerts(name, **labels)), None),
            f"alert {name} {labels}",
            timeout_s,
        )
        return found

    def wait(self, check: Callable[[], T | None], what: str, timeout_s: float = 30.0) -> T:
        """Poll `check` (Prometheus works on its own clock: a scrape, an evaluation)."""

        def answer() -> T | None:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"Prometheus exited ({self.proc.returncode}):\n{self.log()}")
            return check()

        return wait_for(answer, what, timeout_s, interval_s=0.25, explain=self.log)

    def log(self) -> str:
        path = self.directory / "prometheus.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""
