"""The writability gate against real file systems: a read-only bind mount, not a flag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cloudrunner.cli import main
from cloudrunner.event import gate
from cloudrunner.event.gate import GateError, GateMode
from cloudrunner.workspace import ownership
from tests.support.ci import needs_root
from tests.support.mounts import mount, read_only_view


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "README").write_text("hello\n")
    return root


def test_probe_on_a_writable_directory_leaves_nothing(workspace: Path) -> None:
    result = gate.probe_writable(workspace)
    assert result.writable, result.detail
    assert sorted(p.name for p in workspace.iterdir()) == ["README"]


def test_read_only_bind_mount_is_not_writable_even_for_root(
    workspace: Path, tmp_path: Path
) -> None:
    with read_only_view(workspace, tmp_path / "ro") as ro:
        # Permission bits would say yes (root, mode 0755): only a real write tells.
        assert os.stat(ro).st_mode & 0o200
        result = gate.probe_writable(ro)
        assert not result.writable
        assert "EROFS" in result.detail
    assert sorted(p.name for p in workspace.iterdir()) == ["README"]


def test_read_only_tmpfs_is_not_writable(tmp_path: Path) -> None:
    where = tmp_path / "tmpfs"
    where.mkdir()
    mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where))
    try:
        assert gate.probe_writable(where).writable
        mount("-o", "remount,ro", str(where))
        assert not gate.probe_writable(where).writable
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_probe_reports_a_missing_workspace(tmp_path: Path) -> None:
    result = gate.probe_writable(tmp_path / "absent")
    assert not result.writable
    assert "does not exist" in result.detail


def test_auto_mode_opens_from_the_next_event_once_writable(workspace: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    view = tmp_path / "view"
    with read_only_view(workspace, view):
        first = gate.evaluate(view, state)
        assert not first.open
        assert first.mode is GateMode.AUTO
        assert first.probe is not None and not first.probe.writable
        assert "not writable" in first.reason
        # The environment becomes writable: the same mount point, now read-write.
        mount("-o", "remount,bind,rw", str(view))
        second = gate.evaluate(view, state)
        assert second.open
        assert second.probe is not None and second.probe.writable


def test_held_closed_gate_stays_closed_on_a_writable_workspace(
    workspace: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    gate.set_mode(state, GateMode.CLOSED)
    decision = gate.evaluate(workspace, state)
    assert not decision.open
    # Held closed, nothing touches the workspace, not even the probe.
    assert decision.probe is None


def test_held_open_gate_opens_on_a_read_only_workspace(workspace: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    gate.set_mode(state, GateMode.OPEN)
    with read_only_view(workspace, tmp_path / "ro") as ro:
        decision = gate.evaluate(ro, state)
    assert decision.open
    assert decision.probe is not None and not decision.probe.writable
    assert "held open" in decision.reason and "not writable" in decision.reason


def test_state_round_trip_counts_generations(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert gate.read_state(state).mode is GateMode.AUTO
    assert gate.read_state(state).generation == 0
    gate.set_mode(state, GateMode.CLOSED)
    gate.set_mode(state, GateMode.OPEN)
    after = gate.read_state(state)
    assert after.mode is GateMode.OPEN
    assert after.generation == 2
    assert after.changed_by is not None and str(os.getpid()) in after.changed_by


def test_damaged_state_file_is_a_clear_error(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / gate.STATE_FILE).write_text('{"mode": "ajar"}')
    with pytest.raises(GateError, match=r"gate.json is damaged.*cloudrunner gate"):
        gate.read_state(state)


_WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from cloudrunner.workspace import ownership
    from cloudrunner.event import gate

    state = Path(sys.argv[1])
    index = int(sys.argv[2])
    for step in range(25):
        mode = gate.GateMode.CLOSED if (index + step) % 2 else gate.GateMode.OPEN
        gate.set_mode(state, mode)
        seen = gate.read_state(state)  # must always parse: never a torn file
        assert seen.mode in (gate.GateMode.OPEN, gate.GateMode.CLOSED), seen
    """
)


def test_concurrent_processes_never_lose_a_change_or_see_a_torn_state(tmp_path: Path) -> None:
    state = tmp_path / "state"
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(state), str(i)], cwd=Path.cwd())
        for i in range(8)
    ]
    codes = [p.wait(timeout=120) for p in procs]
    assert codes == [0] * 8
    # The lock serialises read-modify-write: every one of the 200 changes is counted.
    assert gate.read_state(state).generation == 8 * 25
    leftovers = sorted(p.name for p in state.iterdir())
    assert leftovers == sorted([gate.LOCK_FILE, gate.STATE_FILE])


def test_cli_close_open_auto_and_status(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert main(["gate", "close", "--state-dir", str(state)]) == 0
    assert "closed" in capsys.readouterr().out
    args = ["gate", "status", "--state-dir", str(state), "--workspace", str(workspace)]
    assert main([*args, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["mode"] == "closed"
    assert status["open"] is False
    if os.geteuid() == 0:
        # root owns the workspace: the probe writes as the hook uid, which may not yet
        assert status["writable"] is False
        assert "the hook user 10001:10001 cannot create a file" in status["probe"]
        assert "the worker grants uid 10001 the owner's access" in status["probe"]
        ownership.grant_workspace(workspace, [10001])
        assert main([*args, "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
    assert status["writable"] is True
    assert main(["gate", "open", "--state-dir", str(state)]) == 0
    capsys.readouterr()
    with read_only_view(workspace, tmp_path / "ro") as ro:
        ro_args = ["gate", "status", "--state-dir", str(state), "--workspace", str(ro)]
        assert main(ro_args) == 0
        text = capsys.readouterr().out
    assert "mode:      open" in text
    assert "not writable" in text
    assert "gate:      open" in text
    assert main(["gate", "auto", "--state-dir", str(state)]) == 0
    assert gate.read_state(state).mode is GateMode.AUTO


def test_cli_without_a_state_dir_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(gate.STATE_DIR_ENV, raising=False)
    assert main(["gate", "open"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--state-dir" in err


def test_cli_reads_the_state_dir_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(gate.STATE_DIR_ENV, str(tmp_path / "envstate"))
    assert main(["gate", "close"]) == 0
    assert gate.read_state(tmp_path / "envstate").mode is GateMode.CLOSED


def test_a_workspace_known_writable_is_not_probed_again(tmp_path: Path) -> None:
    missing = tmp_path / "gone"  # a probe here would fail: the directory does not exist
    decision = gate.evaluate(missing, tmp_path / "state", known_writable=True)
    assert decision.open and decision.probe is None
    assert "not probed again" in decision.reason
    gate.set_mode(tmp_path / "state", gate.GateMode.CLOSED)
    closed = gate.evaluate(missing, tmp_path / "state", known_writable=True)
    assert not closed.open, "a gate held closed stays closed"


@needs_root("probing as another uid needs root")
def test_the_probe_writes_as_the_hook_user_not_as_root(tmp_path: Path) -> None:
    # tmp_path's parents are root's alone (0700): the probe, like the sandbox, sees only
    # the workspace directory itself
    ws = tmp_path / "ws"
    ws.mkdir()
    assert gate.probe_writable(ws).writable  # as root: passes every permission check
    refused = gate.probe_writable(ws, (10001, 10001))
    assert not refused.writable
    assert refused.detail == (
        "the hook user 10001:10001 cannot create a file: Permission denied (EACCES)"
    )
    decision = gate.evaluate(ws, tmp_path / "state", as_user=(10001, 10001))
    assert not decision.open and "10001" in decision.reason
    ownership.grant_workspace(ws, [10001])
    allowed = gate.probe_writable(ws, (10001, 10001))
    assert allowed.writable, allowed.detail
    assert list(ws.iterdir()) == []  # the probe file is gone
    os.chown(ws, 4321, 4321)
    assert gate.default_hook_user(ws) == (4321, 4321)
    os.chown(ws, 0, 0)
    assert gate.default_hook_user(ws) == (10001, 10001)
