"""The daemon's session registry on a real file: kept, restored, and a hostile or damaged
file handled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.daemon.registry import (
    DEFAULT_SESSION,
    DaemonSession,
    SessionInfo,
    SessionRegistry,
)
from cloudrunner.daemon.request_errors import DaemonError
from cloudrunner.errors import CloudrunnerError
from cloudrunner.refusals import ErrorCode


def _registry(path: Path) -> tuple[SessionRegistry, list[SessionInfo]]:
    opened: list[SessionInfo] = []

    def open_session(info: SessionInfo) -> DaemonSession:
        opened.append(info)
        return DaemonSession(info, worker=None, gate_dir=path.parent)  # type: ignore[arg-type]

    return SessionRegistry(path, open_session), opened


def _info(session_id: str, **kw: Any) -> SessionInfo:
    return SessionInfo(session_id, kw.get("workspace"), kw.get("repo"), None, "t")


def test_added_sessions_are_kept_without_the_default_and_restored(tmp_path: Path) -> None:
    path = tmp_path / "daemon" / "sessions.json"
    registry, _ = _registry(path)
    registry.add_default(DaemonSession(_info(DEFAULT_SESSION), None, tmp_path))  # type: ignore[arg-type]
    registry.add(DaemonSession(_info("s1", workspace="/w"), None, tmp_path))  # type: ignore[arg-type]
    kept = json.loads(path.read_text())["sessions"]
    assert [item["session"] for item in kept] == ["s1"]
    again, opened = _registry(path)
    again.restore()
    assert [info.id for info in opened] == ["s1"] and again.get("s1").info.workspace == "/w"


def test_an_unknown_or_removed_session_is_refused_by_its_code(tmp_path: Path) -> None:
    registry, _ = _registry(tmp_path / "sessions.json")
    registry.add(DaemonSession(_info("s1"), None, tmp_path))  # type: ignore[arg-type]
    registry.remove("s1")
    for call in (lambda: registry.get("s1"), lambda: registry.remove("s1")):
        with pytest.raises(DaemonError) as refused:
            call()
        assert refused.value.code is ErrorCode.UNKNOWN_SESSION
    assert json.loads((tmp_path / "sessions.json").read_text()) == {"sessions": []}


def test_a_hostile_registry_opens_only_well_formed_entries_and_drops_passwords(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.json"
    path.write_text(json.dumps({"sessions": [
        {"no": "session"}, "text", None,
        {"session": "s2", "repo": "https://user:hunter2@example.invalid/r.git"},
    ]}))  # fmt: skip
    registry, opened = _registry(path)
    registry.restore()
    assert [info.id for info in opened] == ["s2"]
    assert "hunter2" not in path.read_text() and "hunter2" not in str(opened[0].repo)


def test_a_registry_that_is_not_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    path.write_text("{not json")
    registry, _ = _registry(path)
    with pytest.raises(CloudrunnerError, match=r"sessions\.json cannot be read"):
        registry.restore()
