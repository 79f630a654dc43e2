"""The alerting and recording rules (deploy/prometheus/): promtool checks them and runs their
unit tests, every alert is tested firing and not firing, has its summary, description and
runbook section, and reads only metrics the daemon exports."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from yamllint import linter
from yamllint.config import YamlLintConfig

from tests.support.ci import missing
from tests.support.daemon_metrics import exported_names, names_in
from tests.unit.deploy.manifests import DEPLOY, ROOT, YAMLLINT_CONFIG

PROMETHEUS = DEPLOY / "prometheus"
RULES = PROMETHEUS / "cloudrunner.rules.yml"
RULE_TESTS = PROMETHEUS / "tests" / "cloudrunner.rules.test.yml"
OPERATE = ROOT / "docs" / "guides" / "operate.md"
#: what Prometheus itself adds to every target's series
PROMETHEUS_OWN = {"up"}


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        missing(
            "promtool is not installed: it comes with Debian's prometheus package, which "
            "`bash scripts/setup` installs (apt-get install prometheus)"
        )
    return path


def _promtool_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_promtool(), *args], capture_output=True, text=True, timeout=120, check=False
    )


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _alerts() -> list[dict[str, Any]]:
    return [rule for rule in _rules() if "alert" in rule]


def test_promtool_checks_the_rules() -> None:
    result = _promtool_run("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in result.stdout


def test_the_rules_unit_tests_pass_under_promtool() -> None:
    result = _promtool_run("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_unit_tests_catch_a_changed_threshold(tmp_path: Path) -> None:
    # the same tests against rules whose latency threshold moved: promtool must fail them
    rules = RULES.read_text()
    assert "p99_5m > 5\n" in rules
    (tmp_path / "cloudrunner.rules.yml").write_text(rules.replace("p99_5m > 5\n", "p99_5m > 50\n"))
    (tmp_path / "tests").mkdir()
    shutil.copy(RULE_TESTS, tmp_path / "tests" / RULE_TESTS.name)
    result = _promtool_run("test", "rules", str(tmp_path / "tests" / RULE_TESTS.name))
    assert result.returncode != 0
    assert "alertname: CloudrunnerSlowEvents" in result.stdout + result.stderr


def test_a_rule_that_does_not_parse_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "broken.rules.yml"
    broken.write_text(
        RULES.read_text().replace("cloudrunner_engine_up == 0", "cloudrunner_engine_up ==")
    )
    result = _promtool_run("check", "rules", str(broken))
    assert result.returncode != 0
    assert '"CloudrunnerEngineUnreachable": could not parse expression' in result.stderr


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in tests:
        for check in case.get("alert_rule_test", []):
            (fired if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in _alerts()}
    assert names, "no alert in the rules"
    assert names - fired == set(), "alerts never tested firing"
    assert names - quiet == set(), "alerts never tested not firing"
    assert (fired | quiet) - names == set(), "tests of alerts that do not exist"


def test_every_alert_has_a_summary_a_description_and_its_runbook_section() -> None:
    headings = {
        line.removeprefix("### ").strip()
        for line in OPERATE.read_text().splitlines()
        if line.startswith("### ")
    }
    for rule in _alerts():
        name = rule["alert"]
        notes = rule.get("annotations", {})
        assert notes.get("summary") and notes.get("description"), name
        assert rule.get("labels", {}).get("severity") in {"critical", "warning"}, name
        # the anchor MkDocs (and a repository browser) gives the heading `### Name`
        assert notes.get("runbook_url") == f"docs/guides/operate.md#{name.lower()}", name
        assert name in headings, f"docs/guides/operate.md has no section ### {name}"


def test_every_metric_the_rules_read_is_one_the_daemon_exports() -> None:
    recorded = {rule["record"] for rule in _rules() if "record" in rule}
    known = exported_names() | recorded | PROMETHEUS_OWN
    for rule in _rules():
        read = names_in(rule["expr"])
        assert read, rule
        assert read <= known, f"{rule.get('alert') or rule.get('record')}: {read - known}"


def test_the_rules_pass_yamllint() -> None:
    config = YamlLintConfig(file=str(YAMLLINT_CONFIG))
    for path in (RULES, RULE_TESTS):
        problems = list(linter.run(path.read_text(), config, str(path)))
        assert problems == [], (path, [str(p) for p in problems])


@pytest.mark.parametrize("expr", ["cloudrunner_nonexistent_total", "rate(cloudrunner_events[5m])"])
def test_the_metric_check_notices_a_name_the_daemon_does_not_export(expr: str) -> None:
    assert not names_in(expr) <= exported_names()
