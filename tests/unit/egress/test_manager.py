"""The rules file: changes take effect on the next use; a broken edit keeps the old rules."""

from __future__ import annotations

import os
from pathlib import Path

import docker

from cloudrunner.egress.manager import Egress
from cloudrunner.egress.rules import EgressSettings


def _no_engine() -> docker.DockerClient:
    raise AssertionError("these checks need no engine")


def test_the_rules_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    egress = Egress(
        EgressSettings(), client=_no_engine, state_dir=tmp_path, worker_id="w", rules_file=rules
    )
    assert egress.policy("project") == "none" and egress.status() == (
        True, "no source uses the egress proxy",
    )  # fmt: skip
    rules.write_text('[project]\npolicy = "allowlist"\ndomains = ["a.example.com"]\n')
    assert egress.policy("project") == "allowlist"
    assert egress.settings.project.domains == ("a.example.com",)
    rules.write_text('[project]\npolicy = "open"\n')  # refused: the old rules stay
    os.utime(rules, ns=(1, 10**18))
    assert egress.policy("project") == "allowlist"
    assert egress.problem and "never get an open network" in egress.problem
    assert egress.status()[0] is False
    rules.write_text('[projects]\npolicy = "none"\n')
    os.utime(rules, ns=(1, 2 * 10**18))
    egress.policy("project")
    assert egress.problem and "unknown tables ['projects']" in egress.problem
    rules.unlink()
    assert egress.policy("project") == "none" and egress.problem is None


def test_open_uses_the_named_network_or_docker_bridge(tmp_path: Path) -> None:
    settings = EgressSettings.model_validate(
        {"enterprise": {"policy": "open"}, "team": {"policy": "open"}}
    )
    egress = Egress(
        settings, client=_no_engine, state_dir=tmp_path, worker_id="w",
        default_networks=lambda kind: "corp" if kind == "team" else "none",
    )  # fmt: skip
    assert egress.network_for("enterprise") == "bridge"
    assert egress.network_for("team") == "corp"
    assert egress.network_for("project") is None
