"""deploy/compose.agent.yaml (the co-located model): valid against the Compose
specification's schema (offline), linted, and sharing with the agent exactly the workspace
and the socket's directory, at the paths the worker uses (tests/e2e/test_colocated.py runs
it)."""

from __future__ import annotations

import re
from typing import Any

import yaml
from yamllint import linter
from yamllint.config import YamlLintConfig

from tests.unit.deploy.manifests import DEPLOY, YAMLLINT_CONFIG
from tests.unit.deploy.test_compose import check_schema, resolve

COMPOSE = DEPLOY / "compose.agent.yaml"
ENV_EXAMPLE = DEPLOY / "compose.agent.env.example"


def _services() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = yaml.safe_load(COMPOSE.read_text())["services"]
    return services


def _mounts(name: str) -> dict[str, dict[str, Any]]:
    return {resolve(v["target"]): v for v in _services()[name]["volumes"]}


def test_the_file_matches_the_compose_specification_and_lints_clean() -> None:
    proc = check_schema(COMPOSE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = YamlLintConfig(file=str(YAMLLINT_CONFIG))
    assert list(linter.run(COMPOSE.read_text(), config, str(COMPOSE))) == []


def test_the_workspace_is_at_the_same_path_in_both_with_rslave_propagation() -> None:
    command = [resolve(w) for w in _services()["worker"]["command"]]
    workspace = command[command.index("--workspace") + 1]
    socket = command[command.index("--socket") + 1]
    for name in ("agent", "worker"):
        mount = _mounts(name)[workspace]
        assert resolve(mount["source"]) == workspace and mount["type"] == "bind"
        assert mount["bind"]["propagation"] == "rslave"  # a later writable mount is seen
        run_dir = _mounts(name)[socket.rsplit("/", 1)[0]]
        assert resolve(run_dir["source"]) == resolve(run_dir["target"])
        assert resolve(_services()[name]["environment"]["CLOUDRUNNER_SOCKET"]) == socket


def test_the_agent_gets_neither_the_engine_nor_the_state() -> None:
    agent, worker = _mounts("agent"), _mounts("worker")
    assert "/var/run/docker.sock" in worker and "/var/run/docker.sock" not in agent
    state = resolve(_services()["worker"]["environment"]["CLOUDRUNNER_STATE_DIR"])
    assert state in worker and state not in agent
    enterprise = resolve(_services()["worker"]["environment"]["CLOUDRUNNER_ENTERPRISE_HOOKS"])
    assert worker[enterprise.rsplit("/", 1)[0]]["read_only"] is True
    assert _services()["agent"]["user"] == "10010:10010"  # the socket is the worker uid's
    service = _services()["worker"]
    assert service["read_only"] is True and service["cap_drop"] == ["ALL"]


def test_the_env_example_names_every_variable_the_file_reads() -> None:
    names = set(re.findall(r"\$\{(\w+)", COMPOSE.read_text()))
    example = {
        line.split("=", 1)[0]
        for line in ENV_EXAMPLE.read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert names and names - example == set()
