"""`cloudrunner vm`'s pure parts: each event's timeout and failClosed from the loaded
sources, the agent's hooks file, the unit's quoting, and `--check` on good, faulty and
hostile files (no daemon: tests/e2e/test_vm_command.py runs the output)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.protocol.events import CLOUD_EVENTS
from cloudrunner.settings import Settings, load_settings
from cloudrunner.vm import MARGIN_S, Client, EventNeed
from cloudrunner.vm import provisioning as vm_setup


def _settings(tmp_path: Path, **overrides: Any) -> Settings:
    return load_settings(
        environ={},
        overrides={"state_dir": str(tmp_path / "state"), "workspace.path": str(tmp_path / "ws"),
                   **overrides},
    )  # fmt: skip


def _hooks(path: Path, hooks: dict[str, list[dict[str, Any]]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "hooks": hooks}))
    return path


def _client(tmp_path: Path) -> Client:
    binary = tmp_path / "bin" / "cloudrunner-hook"
    binary.parent.mkdir(exist_ok=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    return Client((str(binary), "hook"), compiled=True)


def test_timeouts_cover_the_sources_in_turn_and_failclosed_follows_the_hooks(
    tmp_path: Path,
) -> None:
    enterprise = _hooks(tmp_path / "ent" / "hooks.json", {
        "beforeShellExecution": [{"command": "a", "timeout": 100, "failClosed": True}],
    })  # fmt: skip
    _hooks(tmp_path / "ws" / ".cursor" / "hooks.json", {
        "beforeShellExecution": [{"command": "b", "timeout": 200}, {"command": "c"}],
        "afterFileEdit": [{"command": "d", "timeout": 5}],
    })  # fmt: skip
    made = vm_setup.plan(
        _settings(tmp_path, **{"sources.enterprise_hooks": str(enterprise), "hook_timeout": 60})
    )
    needs = {n.event: n for n in made.needs}
    assert set(needs) == set(CLOUD_EVENTS) and len(needs) == 14
    shell = needs["beforeShellExecution"]
    # enterprise first (100 s), then the project's two side by side (the longer, 200 s)
    assert shell.timeout == 100 + 200 + MARGIN_S
    assert shell.fail_closed and shell.fail_closed_by[0].startswith("enterprise ")
    assert shell.longest is not None and shell.longest[1] == 200
    # a short hook still gets the default: a commit may add a slower one
    assert needs["afterFileEdit"].timeout == 60 + MARGIN_S
    assert not needs["afterFileEdit"].fail_closed
    assert needs["stop"] == EventNeed("stop", 60 + MARGIN_S, False, None)
    assert made.notes == ()


def test_more_hooks_than_run_at_once_take_more_than_one_turn(tmp_path: Path) -> None:
    _hooks(tmp_path / "ws" / ".cursor" / "hooks.json",
           {"stop": [{"command": f"h{i}", "timeout": 100} for i in range(5)]})  # fmt: skip
    made = vm_setup.plan(_settings(tmp_path, max_parallel_hooks=2))
    assert {n.event: n for n in made.needs}["stop"].timeout == 3 * 100 + MARGIN_S


def test_a_workspace_not_cloned_yet_is_said(tmp_path: Path) -> None:
    made = vm_setup.plan(_settings(tmp_path))
    assert any("not counted" in note for note in made.notes)


def test_the_agent_file_routes_every_event_and_checks_clean(tmp_path: Path) -> None:
    _hooks(tmp_path / "ws" / ".cursor" / "hooks.json",
           {"stop": [{"command": "x", "failClosed": True}]})  # fmt: skip
    needs = vm_setup.plan(_settings(tmp_path)).needs
    client = _client(tmp_path)
    doc = vm_setup.agent_hooks(needs, client, tmp_path / "state dir" / "cloudrunner.sock")
    assert set(doc["hooks"]) == set(CLOUD_EVENTS)
    stop = doc["hooks"]["stop"][0]
    assert stop["failClosed"] is True
    assert shlex.split(stop["command"]) == [
        client.argv[0],
        "hook",
        "stop",
        "--socket",
        str(tmp_path / "state dir" / "cloudrunner.sock"),
    ]
    assert "failClosed" not in doc["hooks"]["preCompact"][0]
    assert vm_setup.check(doc, needs) == []
    launcher = Path(client.argv[0]).with_name("cloudrunner")
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o755)
    python = Client((str(launcher), "hook"), compiled=False)
    assert vm_setup.check(vm_setup.agent_hooks(needs, python, Path("/s")), needs) == []


def test_check_names_each_fault(tmp_path: Path) -> None:
    _hooks(
        tmp_path / "ws" / ".cursor" / "hooks.json",
        {"beforeShellExecution": [{"command": "g", "timeout": 500, "failClosed": True}]},
    )
    needs = vm_setup.plan(_settings(tmp_path)).needs
    doc = vm_setup.agent_hooks(needs, _client(tmp_path), Path("/s.sock"))
    del doc["hooks"]["preCompact"]
    doc["hooks"]["beforeShellExecution"][0]["timeout"] = 120
    doc["hooks"]["stop"][0]["command"] = "/nowhere/cloudrunner-hook hook stop"
    doc["hooks"]["subagentStop"][0]["command"] = doc["hooks"]["subagentStart"][0]["command"]
    del doc["hooks"]["preToolUse"][0]["timeout"]
    faults = vm_setup.check(doc, needs)
    assert "preCompact: not routed to the cloudrunner client" in faults
    assert "subagentStop: not routed to the cloudrunner client" in faults
    (short,) = [f for f in faults if f.startswith("beforeShellExecution: timeout")]
    assert "120s is shorter" in short and "runs for up to 500s" in short
    assert any(f.startswith("stop: the client /nowhere/cloudrunner-hook does not exist")
               for f in faults)  # fmt: skip
    assert any(f.startswith("preToolUse: no timeout") for f in faults)
    doc["hooks"]["beforeShellExecution"][0] = {
        **doc["hooks"]["beforeShellExecution"][0],
        "timeout": 9999,
        "failClosed": False,
    }
    assert any("not failClosed" in f for f in vm_setup.check(doc, needs))


@pytest.mark.parametrize(
    "doc",
    [None, [], "x", {"hooks": []}, {"hooks": {"stop": "cloudrunner hook stop"}},
     {"hooks": {"stop": [{"command": 3}, {"command": "'unclosed"}, None, {}]}}],
)  # fmt: skip
def test_check_on_a_hostile_file_reports_faults_and_never_raises(doc: object) -> None:
    needs = [EventNeed(e, 90, False, None) for e in CLOUD_EVENTS]
    faults = vm_setup.check(doc, needs)
    assert faults and all("\n" not in f for f in faults)


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=20), inner,
                                                                max_size=4),
    max_leaves=12,
))  # fmt: skip
def test_check_takes_any_json_value(doc: object) -> None:
    needs = [EventNeed(e, 90, False, None) for e in CLOUD_EVENTS]
    assert isinstance(vm_setup.check({"hooks": doc}, needs), list)


def test_the_unit_quotes_paths_with_spaces_and_percent_signs(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "a b%c")
    unit = vm_setup.systemd_unit(
        settings,
        vm_setup.serve_argv(settings, "/opt/cr/cloudrunner", ["--isolation", "session"]),
        "agent",
    )
    (exec_line,) = [x for x in unit.splitlines() if x.startswith("ExecStart=")]
    assert exec_line.startswith("ExecStart=/opt/cr/cloudrunner serve --isolation session ")
    assert '"--state-dir" ' not in exec_line and "%%c" in exec_line
    assert f'"{tmp_path}/a b%%c/state"' in exec_line
    assert "User=agent" in unit and "SupplementaryGroups=docker" in unit


def test_find_client_prefers_the_compiled_one(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "cloudrunner"
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o755)
    assert vm_setup.find_client(bin_dir=bin_dir) == Client((str(launcher), "hook"), False)
    compiled = _client(tmp_path)
    assert vm_setup.find_client(bin_dir=bin_dir) == compiled
    assert vm_setup.find_client(launcher) == Client((str(launcher), "hook"), False)
    assert vm_setup.find_client(Path(compiled.argv[0])) == compiled
    for bad in (Path("relative/cloudrunner-hook"), tmp_path / "cloudrunner", launcher.parent):
        with pytest.raises(vm_setup.VmSetupError):
            vm_setup.find_client(bad)


def test_foreign_entries_are_the_ones_a_rewrite_would_drop(tmp_path: Path) -> None:
    needs = [EventNeed(e, 90, False, None) for e in CLOUD_EVENTS]
    ours = vm_setup.agent_hooks(needs, _client(tmp_path), Path("/s.sock"))
    assert vm_setup.foreign_entries(ours) == []
    ours["hooks"]["stop"].append({"command": "./notify.sh"})
    ours["hooks"]["afterFileEdit"] = [{"type": "prompt", "prompt": "x"}]
    ours["hooks"]["preCompact"] = "not a list"
    found = vm_setup.foreign_entries(ours)
    assert "stop: './notify.sh'" in found and len(found) == 3
    assert vm_setup.foreign_entries([]) == ["the file is not a hooks file"]


def test_find_client_looks_on_path_after_its_own_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = _client(tmp_path)
    monkeypatch.setenv("PATH", str(Path(compiled.argv[0]).parent))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert vm_setup.find_client(bin_dir=empty) == compiled
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(vm_setup.VmSetupError, match="give --client PATH"):
        vm_setup.find_client(bin_dir=empty)
