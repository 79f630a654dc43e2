"""One workspace, the agent's: a worker with a configured workspace refuses an event whose
workspace_roots[0] names another directory, records the refusal naming both, and runs
nothing; `--repo URL --workspace DIR` clones into DIR once DIR is writable (no engine:
nothing here runs a hook)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.audit import verify_log
from cloudrunner.settings import load_settings
from cloudrunner.worker import PayloadRefused, Worker
from cloudrunner.workspace_match import MISMATCH, check_roots
from tests.support.audit_records import read_records
from tests.support.git_repos import empty_repo


def _worker(root: Path, **overrides: Any) -> Worker:
    settings = load_settings(
        environ={},
        overrides={"state_dir": str(root / "state"), "worker_id": "unit-ws", **overrides},
    )
    return Worker(settings, reap=False)


def _event(roots: object = None, **more: Any) -> bytes:
    payload: dict[str, Any] = {"conversation_id": "c1", "hook_event_name": "stop",
                               "status": "completed", **more}  # fmt: skip
    if roots is not None:
        payload["workspace_roots"] = roots
    return json.dumps(payload).encode()


def test_the_same_directory_through_a_link_is_the_workspace(tmp_path: Path) -> None:
    ws = empty_repo(tmp_path / "ws")
    (tmp_path / "link").symlink_to(ws)
    assert check_roots(ws, [str(tmp_path / "link")]).code is None
    assert check_roots(tmp_path / "link", [str(ws) + "/"]).code is None
    assert check_roots(ws, [str(ws), "/elsewhere"]).code is None  # the first root counts


def test_another_directory_is_a_mismatch_naming_both(tmp_path: Path) -> None:
    ws, other = empty_repo(tmp_path / "ws"), tmp_path / "other"
    other.mkdir()
    (tmp_path / "sneaky").symlink_to(other)
    check = check_roots(ws, [str(tmp_path / "sneaky")])
    assert check.code == MISMATCH
    assert str(tmp_path / "sneaky") in check.reason and str(other) in check.reason
    assert str(ws) in check.reason
    # a parent or a child of the workspace is another directory too
    assert check_roots(ws, [str(tmp_path)]).code == MISMATCH
    assert check_roots(ws, [str(ws / "sub")]).code == MISMATCH


@pytest.mark.parametrize("roots", [None, []])
def test_no_roots_is_served_from_the_configured_workspace(roots: object) -> None:
    check = check_roots(Path("/w"), roots)
    assert check.code is None and check.absent


@pytest.mark.parametrize(
    "roots", ["/w", {"0": "/w"}, [None], [3], [""], ["relative/dir"], [["/w"]], ["/w\x00x"]]
)
def test_malformed_roots_are_invalid_payloads(roots: object) -> None:
    check = check_roots(Path("/w"), roots)
    assert check.code == "payload-invalid"
    assert "workspace_roots" in check.reason and "\n" not in check.reason


@given(st.lists(st.text(max_size=40), max_size=3) | st.none() | st.integers() | st.text())
def test_any_roots_value_gets_a_verdict_and_never_raises(roots: object) -> None:
    check = check_roots(Path("/srv/ws"), roots)
    if check.code is None:
        assert check.absent or os.path.realpath(roots[0]) == "/srv/ws"  # type: ignore[index]


def test_the_worker_refuses_a_mismatch_records_both_paths_and_runs_nothing(
    tmp_path: Path,
) -> None:
    ws = empty_repo(tmp_path / "ws")
    worker = _worker(tmp_path, **{"workspace.path": str(ws)})
    with pytest.raises(PayloadRefused) as refused:
        worker.handle(_event([str(tmp_path)]))
    assert refused.value.code == MISMATCH
    (record,) = read_records(worker.settings.audit_path)
    assert record["kind"] == "refused" and record["event"] == "stop"
    assert str(tmp_path) in record["reason"] and str(ws) in record["reason"]
    assert record["payload"]["workspace_roots"] == [str(tmp_path)]
    # the matching event runs; one without roots runs too, and its record says so
    worker.handle(_event([str(ws)]))
    worker.handle(_event())
    received = [r for r in read_records(worker.settings.audit_path) if r["kind"] == "received"]
    assert [r.get("workspace_roots_absent") for r in received] == [None, True]
    assert {r["workspace"] for r in received} == {str(ws)}
    assert verify_log(worker.settings.audit_path).ok


def test_a_repo_without_a_workspace_refuses_the_agents_directory(tmp_path: Path) -> None:
    """The daemon's own clone is not the agent's tree: an event naming the agent's
    checkout is refused, not run on the clone."""
    origin = empty_repo(tmp_path / "ws")
    worker = _worker(tmp_path, **{"workspace.repo": origin.as_uri()})
    with pytest.raises(PayloadRefused) as refused:
        worker.handle(_event([str(origin)]))
    assert refused.value.code == MISMATCH
    assert not worker.settings.clone_dir.exists() or not any(worker.settings.clone_dir.iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to probe as the hook user")
def test_the_clone_into_dir_waits_for_dir_to_be_writable(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    origin = empty_repo(tmp_path / "ws")
    dest = tmp_path / "agent-ws"
    dest.mkdir(mode=0o555)  # root's and read-only: the hook user cannot write it
    dest.chmod(0o555)
    worker = _worker(
        tmp_path, **{"workspace.repo": origin.as_uri(), "workspace.ref": "main",
                     "workspace.path": str(dest)},
    )  # fmt: skip
    reply = worker.handle(_event([str(dest)]))
    assert reply.gated and not (dest / ".git").exists()
    assert read_records(worker.settings.audit_path)[-1]["kind"] == "gated"
    dest.chmod(0o777)  # the volume became writable
    reply = worker.handle(_event([str(dest)]))
    assert not reply.gated and (dest / ".git").is_dir()
    received = [r for r in read_records(worker.settings.audit_path) if r["kind"] == "received"]
    assert received[-1]["workspace"] == str(dest)
    assert not (tmp_path / ".agent-ws.lock").exists()  # the lock is in the state directory
    assert verify_log(worker.settings.audit_path).ok


def test_serve_says_which_tree_the_hooks_act_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cloudrunner.commands.serve import _say_workspace

    base = {"state_dir": str(tmp_path / "state")}
    _say_workspace(load_settings(environ={}, overrides={**base, "workspace.repo": "file:///o"}))
    warned = capsys.readouterr().err
    assert "warning: --repo without --workspace" in warned and "workspace-mismatch" in warned
    _say_workspace(load_settings(environ={}, overrides={
        **base, "workspace.repo": "file:///o", "workspace.path": "/srv/ws"}))  # fmt: skip
    said = capsys.readouterr().err
    assert "workspace /srv/ws (cloned from file:///o into it once it is writable)" in said
