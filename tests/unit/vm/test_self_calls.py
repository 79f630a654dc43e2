"""A daemon never loads hooks that call its own client (cloudrunner/vm/self_calls.py): the
agent's hooks file found where the fleet's hooks should be, and hostile files there."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.settings import load_settings
from cloudrunner.vm.self_calls import calls_client, client_calls, self_call_problem

AGENT_FILE = {
    "version": 1,
    "hooks": {
        "beforeShellExecution": [
            {"command": "/usr/bin/cloudrunner-hook hook beforeShellExecution --socket /s"}
        ],
        "stop": [{"command": "cloudrunner hook stop"}],
    },
}


@pytest.mark.parametrize(
    ("command", "calls"),
    [
        ("/usr/bin/cloudrunner-hook hook stop --socket /var/lib/cloudrunner/x.sock", True),
        ("'/opt/my dir/cloudrunner' hook afterFileEdit", True),
        ("cloudrunner-hook health", False),
        ("cloudrunner validate .", False),
        ("./guard.sh cloudrunner-hook hook stop", False),
        ("/usr/bin/cloudrunner-hookx hook stop", False),
        ("'unbalanced", False),
        ("", False),
        (None, False),
        (["cloudrunner-hook", "hook"], False),
    ],
)
def test_a_command_calls_the_client_only_as_its_program(command: object, calls: bool) -> None:
    assert calls_client(command) is calls


@given(st.text(max_size=200))
def test_any_text_is_judged_without_an_exception(command: str) -> None:
    assert calls_client(command) in (True, False)


def test_the_agents_file_is_found_entry_by_entry(tmp_path: Path) -> None:
    path = tmp_path / "hooks.json"
    path.write_text(json.dumps(AGENT_FILE))
    assert client_calls(path) == [
        "beforeShellExecution: /usr/bin/cloudrunner-hook hook beforeShellExecution --socket /s",
        "stop: cloudrunner hook stop",
    ]
    assert client_calls(tmp_path) == client_calls(path)  # a directory holding hooks.json


@pytest.mark.parametrize(
    "content",
    [b"", b"\xff\xfe", b"{not json", b"[]", b'{"hooks": []}', b'{"hooks": {"stop": "x"}}',
     b'{"hooks": {"stop": [1, null, {"command": 7}]}}'],
)  # fmt: skip
def test_a_broken_file_is_left_to_the_sources_loader(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "hooks.json"
    path.write_bytes(content)
    assert client_calls(path) == []


def test_a_fifo_an_absent_file_and_a_huge_one_neither_hang_nor_count(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert client_calls(fifo) == []  # returns at once: opened non-blocking, not a regular file
    assert client_calls(tmp_path / "absent.json") == []
    huge = tmp_path / "huge.json"
    text = json.dumps(AGENT_FILE)
    huge.write_text(text[:-1] + " " * (1024 * 1024) + "}")
    assert client_calls(huge) == []


def test_the_refusal_names_the_file_the_key_and_the_daemons_socket(tmp_path: Path) -> None:
    agent = tmp_path / "cursor" / "hooks.json"
    agent.parent.mkdir()
    agent.write_text(json.dumps(AGENT_FILE))
    settings = load_settings(
        environ={},
        overrides={"sources.enterprise_hooks": agent, "state_dir": tmp_path / "state"},
    )
    problem = self_call_problem(settings)
    assert problem is not None
    assert str(agent) in problem and "sources.enterprise_hooks" in problem
    assert str(tmp_path / "state" / "cloudrunner.sock") in problem
    assert "/etc/cloudrunner/enterprise-hooks.json" in problem
    team = load_settings(environ={}, overrides={
        "sources.enterprise_hooks": tmp_path / "none.json", "sources.team_hooks": agent.parent,
    })  # fmt: skip
    assert "sources.team_hooks" in (self_call_problem(team) or "")
    fleet = tmp_path / "fleet.json"
    fleet.write_text('{"version": 1, "hooks": {"stop": [{"command": "./notify.sh"}]}}')
    fine = load_settings(environ={}, overrides={"sources.enterprise_hooks": fleet})
    assert self_call_problem(fine) is None
