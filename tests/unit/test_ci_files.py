"""The composite action and the example workflow: valid YAML, and every cloudrunner command
and flag they call exists (they are not run here: there is no GitHub)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cloudrunner.cli import build_parser
from tests.support.doc_commands import subparser

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
WORKFLOW = ROOT / "examples" / "ci" / "cloudrunner-hooks.yml"


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def cloudrunner_calls(script: str) -> list[str]:
    """Each `cloudrunner ...` command line of a shell script, continuations joined."""
    joined = script.replace("\\\n", " ")
    return [m.group(1) for m in re.finditer(r'cloudrunner"?\)?"?\s+([a-z][^\n]*)', joined)]


def check_call(line: str) -> None:
    parser = build_parser()
    words = line.split()
    while words and (child := subparser(parser, words[0])) is not None:
        parser, words = child, words[1:]
    needs_command = any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
    assert not needs_command, f"not a cloudrunner command: {line}"
    known = set(parser._option_string_actions)
    for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line):
        assert flag in known, f"{flag} is not a flag of `cloudrunner {line}`"


def scripts(steps: list[dict[str, Any]]) -> list[str]:
    return [step["run"] for step in steps if "run" in step]


def test_the_action_is_a_composite_action_whose_inputs_exist() -> None:
    action = load(ACTION)
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert all("shell" in step for step in steps if "run" in step)
    used = set(re.findall(r"inputs\.([a-z-]+)", ACTION.read_text()))
    assert used and used <= set(action["inputs"])


def test_the_action_installs_validates_and_replays_with_real_flags() -> None:
    calls = [c for s in scripts(load(ACTION)["runs"]["steps"]) for c in cloudrunner_calls(s)]
    assert [c.split()[0] for c in calls] == ["validate", "images", "replay"]
    for call in calls:
        check_call(call)


def test_the_example_workflow_uses_the_action_with_its_inputs() -> None:
    workflow = load(WORKFLOW)
    inputs = set(load(ACTION)["inputs"])
    uses = [s for job in workflow["jobs"].values() for s in job["steps"] if "cloudrunner@" in
            str(s.get("uses", ""))]  # fmt: skip
    assert len(uses) == 2
    for step in uses:
        assert set(step["with"]) <= inputs


@pytest.mark.parametrize(
    "line", ["replay s.jsonl --bogus", "audit nope FILE"], ids=["flag", "command"]
)
def test_the_check_catches_a_wrong_flag_or_command(line: str) -> None:
    with pytest.raises(AssertionError):
        check_call(line)
