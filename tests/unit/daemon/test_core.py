"""The daemon's sessions and their persistence (nothing here reaches the engine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudrunner.daemon.core import DEFAULT_SESSION, Daemon, DaemonError
from cloudrunner.errors import CloudrunnerError
from cloudrunner.settings import load_settings
from tests.support.git_repos import hooks_repo


def _daemon(state: Path) -> Daemon:
    return Daemon(load_settings(overrides={"state_dir": state}, environ={}))


def test_sessions_are_created_persisted_and_restored(tmp_path: Path) -> None:
    daemon = _daemon(tmp_path)
    adopted = daemon.create_session(workspace=str(tmp_path / "ws"))
    cloned = daemon.create_session(repo="file:///srv/repo.git", ref="main")
    assert {s.id for s in daemon.sessions()} == {DEFAULT_SESSION, adopted.id, cloned.id}
    daemon.close()

    again = _daemon(tmp_path)
    restored = {s.id: s for s in again.sessions()}
    assert restored[adopted.id].workspace == str(tmp_path / "ws")
    assert (restored[cloned.id].repo, restored[cloned.id].ref) == ("file:///srv/repo.git", "main")
    assert again.close_session(adopted.id) == 0
    again.close()
    assert [s.id for s in _daemon(tmp_path).sessions()] == [DEFAULT_SESSION, cloned.id]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({}, "exactly one of"),
        ({"workspace": "/a", "repo": "b"}, "exactly one of"),
        ({"workspace": "relative/path"}, "absolute path"),
    ],
)
def test_a_session_needs_one_absolute_workspace_or_a_repo(
    tmp_path: Path, kwargs: dict[str, str], fragment: str
) -> None:
    with pytest.raises(DaemonError, match=fragment) as exc:
        _daemon(tmp_path).create_session(**kwargs)
    assert (exc.value.code, exc.value.status) == ("invalid-request", 400)


def test_unknown_and_default_sessions(tmp_path: Path) -> None:
    daemon = _daemon(tmp_path)
    with pytest.raises(DaemonError) as exc:
        daemon.handle_event("nope", "stop", b"{}")
    assert (exc.value.code, exc.value.status) == ("unknown-session", 404)
    with pytest.raises(DaemonError) as exc:
        daemon.close_session(DEFAULT_SESSION)
    assert exc.value.code == "default-session"


def test_each_session_has_its_own_gate(tmp_path: Path) -> None:
    daemon = _daemon(tmp_path)
    sid = daemon.create_session(workspace=str(tmp_path)).id
    assert daemon.set_gate(sid, "closed")["mode"] == "closed"
    assert daemon.set_gate(DEFAULT_SESSION, "open")["mode"] == "open"
    gates = tmp_path / "daemon" / "gates" / sid
    assert json.loads((gates / "gate.json").read_text())["mode"] == "closed"
    with pytest.raises(DaemonError, match="must be one of"):
        daemon.set_gate(sid, "ajar")


def test_a_damaged_registry_is_an_error_naming_the_file(tmp_path: Path) -> None:
    registry = tmp_path / "daemon" / "sessions.json"
    registry.parent.mkdir(parents=True)
    registry.write_text("{not json")
    with pytest.raises(CloudrunnerError, match=r"sessions\.json cannot be read"):
        _daemon(tmp_path)


def test_events_are_refused_while_draining(tmp_path: Path) -> None:
    daemon = _daemon(tmp_path)
    assert daemon.drain(0.1) is True
    with pytest.raises(DaemonError) as exc:
        daemon.handle_event(DEFAULT_SESSION, "stop", b"{}")
    assert (exc.value.code, exc.value.status) == ("draining", 503)
    assert daemon.readiness() == (False, {"reason": "the daemon is shutting down"})


@pytest.mark.parametrize("remove", [True, False])
def test_a_sessions_hook_homes_go_with_it_when_configured(tmp_path: Path, remove: bool) -> None:
    settings = load_settings(
        overrides={"state_dir": tmp_path, "home.remove_with_session": remove}, environ={}
    )
    daemon = Daemon(settings)
    first = daemon.create_session(workspace=str(tmp_path / "ws"))
    second = daemon.create_session(workspace=str(tmp_path / "ws"))
    homes = {
        sid: daemon._session(sid).worker.home_root for sid in (first.id, second.id)
    }  # fmt: skip
    # never shared: the default session and each daemon session have their own
    assert len({*homes.values(), daemon._session(DEFAULT_SESSION).worker.home_root}) == 3
    for root in homes.values():
        (root / "k" / "project").mkdir(parents=True)
        (root / "k" / "project" / "memory").write_text("kept\n")
    daemon.close_session(first.id)
    assert homes[first.id].exists() is not remove
    assert (homes[second.id] / "k" / "project" / "memory").read_text() == "kept\n"
    daemon.close()


def test_the_fail_policy_covers_every_session_and_forgets_a_closed_one(tmp_path: Path) -> None:
    main = hooks_repo(
        tmp_path / "main", {"beforeShellExecution": [{"command": "a", "failClosed": True}]}
    )
    other = hooks_repo(tmp_path / "other", {"preToolUse": [{"command": "b", "failClosed": True}]})
    state = tmp_path / "state"
    settings = load_settings(
        overrides={"state_dir": state, "workspace": {"path": main}}, environ={}
    )
    daemon = Daemon(settings)
    session = daemon.create_session(workspace=str(other))
    assert daemon.publish_policy()
    policy = json.loads((state / "fail-policy.json").read_text())
    assert policy["fail_closed_events"] == ["beforeShellExecution", "preToolUse"]
    assert policy["daemon"] == daemon.worker_id
    daemon.close_session(session.id)
    policy = json.loads((state / "fail-policy.json").read_text())
    assert policy["fail_closed_events"] == ["beforeShellExecution"]
    daemon.close()


def test_the_spool_is_taken_into_the_daemons_log_and_said_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "fallback.spool").write_bytes(b"garbage\n")
    daemon = _daemon(state)
    report = daemon.take_spool()
    daemon.close()
    assert (report.records, report.invalid) == (1, 1)
    assert "1 event(s) answered without a daemon" in capsys.readouterr().err
    (record,) = [json.loads(x) for x in (state / "audit.log").read_text().splitlines()]
    assert record["kind"] == "fallback" and record["invalid"].startswith("the line is not JSON")
