"""deploy/compose.yaml: valid against the Compose specification's schema (offline), and
mounting what the worker needs where it needs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cloudrunner.settings import load_settings
from tests.unit.deploy.manifests import DEPLOY

COMPOSE = DEPLOY / "compose.yaml"
ENV_EXAMPLE = DEPLOY / "compose.env.example"
_DEFAULTED = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def check_schema(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
         str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def resolve(value: str) -> str:
    """A compose value with each `${NAME:-default}` replaced by its default."""
    return _DEFAULTED.sub(lambda m: m.group(2) or "", value)


def worker() -> dict[str, Any]:
    service: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]["worker"]
    return service


def binds() -> dict[str, dict[str, Any]]:
    return {resolve(v["target"]): v for v in worker()["volumes"]}


def test_the_compose_file_matches_the_compose_specification(tmp_path: Path) -> None:
    proc = check_schema(COMPOSE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    broken = yaml.safe_load(COMPOSE.read_text())
    broken["services"]["worker"]["restart_policy"] = "always"  # not a service key
    bad = tmp_path / "compose.yaml"
    bad.write_text(yaml.safe_dump(broken))
    assert check_schema(bad).returncode != 0


def test_the_host_socket_and_identical_paths_are_mounted() -> None:
    mounts = binds()
    assert mounts["/var/run/docker.sock"]["source"] == "/var/run/docker.sock"
    env = {k: resolve(str(v)) for k, v in worker()["environment"].items()}
    state = mounts[env["CLOUDRUNNER_STATE_DIR"]]
    assert state["type"] == "bind" and state["source"] == state["target"]
    enterprise_dir = str(Path(env["CLOUDRUNNER_ENTERPRISE_HOOKS"]).parent)
    enterprise = mounts[enterprise_dir]
    assert enterprise["source"] == enterprise["target"]
    assert enterprise["read_only"] is True
    settings_dir = mounts[str(Path(env["CLOUDRUNNER_CONFIG"]).parent)]
    assert settings_dir["read_only"] is True


def test_the_audit_log_is_on_a_named_volume() -> None:
    document = yaml.safe_load(COMPOSE.read_text())
    env = worker()["environment"]
    audit_dir = str(Path(env["CLOUDRUNNER_AUDIT_LOG"]).parent)
    volume = binds()[audit_dir]
    assert volume["type"] == "volume"
    assert volume["source"] in document["volumes"]


def test_the_worker_is_confined_and_its_api_is_on_loopback() -> None:
    service = worker()
    assert service["read_only"] is True
    assert service["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in service["security_opt"]
    assert all(resolve(p).startswith("127.0.0.1:") for p in service["ports"])
    command = service["command"]
    token = command[command.index("--token-file") + 1]
    assert token == f"/run/secrets/{service['secrets'][0]}"
    assert "DOCKER_GID" in service["group_add"][0]


def test_the_settings_file_is_valid_and_outlasted_by_the_stop_grace_period() -> None:
    settings_dir = resolve(binds()["/etc/cloudrunner"]["source"])
    config = (COMPOSE.parent / settings_dir / "config.toml").resolve()
    assert config == DEPLOY / "config" / "config.toml"
    settings = load_settings(config, environ={})
    grace = worker()["stop_grace_period"]
    assert grace.endswith("s") and int(grace[:-1]) > settings.server.drain_timeout_s


def test_the_env_example_names_every_variable_the_compose_file_reads() -> None:
    names = set(re.findall(r"\$\{(\w+)", COMPOSE.read_text()))
    assert {"DOCKER_GID", "CLOUDRUNNER_STATE_DIR"} <= names
    example = {
        line.split("=", 1)[0]
        for line in ENV_EXAMPLE.read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert names - example == set()


@pytest.mark.parametrize("path", sorted((DEPLOY / "config").glob("*.toml")))
def test_every_settings_file_in_deploy_loads(path: Path) -> None:
    load_settings(path, environ={})
