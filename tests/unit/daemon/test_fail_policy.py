"""The fail policy the daemon publishes: which events, from which sources, and the file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.daemon.fail_policy import (
    POLICY_FILE,
    PolicyBook,
    fail_closed_sources,
    write_policy,
)
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.sources import SourceSet, SourceSettings, load_sources


def _write(path: Path, hooks: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "hooks": hooks}))


def _sources(tmp_path: Path, profile: Profile = Profile.CLOUD) -> SourceSet:
    return load_sources(
        SourceSettings(
            workspace=tmp_path / "repo",
            profile=profile,
            enterprise_path=tmp_path / "etc" / "hooks.json",
            user_home=tmp_path / "home",
        )
    )


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    _write(
        tmp_path / "etc" / "hooks.json",
        {"beforeShellExecution": [{"command": "e", "failClosed": True}]},
    )
    _write(
        tmp_path / "repo" / ".cursor" / "hooks.json",
        {
            "beforeShellExecution": [{"command": "p", "failClosed": True}],
            "preToolUse": [{"command": "a"}, {"command": "b", "failClosed": True}],
            # not in the policy: not failClosed, a prompt hook, an event not in the cloud
            "stop": [{"command": "s"}],
            "beforeSubmitPrompt": [{"type": "prompt", "prompt": "x", "failClosed": True}],
            "beforeMCPExecution": [{"command": "m", "failClosed": True}],
        },
    )
    # user hooks never load in the cloud
    _write(
        tmp_path / "home" / ".cursor" / "hooks.json",
        {"beforeReadFile": [{"command": "u", "failClosed": True}]},
    )
    return tmp_path


def test_only_cloud_command_hooks_with_fail_closed_count(layout: Path) -> None:
    events = fail_closed_sources(_sources(layout).sources)
    assert events == {
        "beforeShellExecution": {SourceKind.ENTERPRISE, SourceKind.PROJECT},
        "preToolUse": {SourceKind.PROJECT},
    }


def test_the_file_names_the_events_the_sources_and_the_daemon(layout: Path) -> None:
    run = layout / "run"
    run.mkdir()
    book = PolicyBook(run, daemon_id="w-1", pid=42)
    book.observe("default", layout / "repo", _sources(layout))
    document = json.loads((run / POLICY_FILE).read_text())
    assert document["version"] == 1
    assert document["daemon"] == "w-1"
    assert document["pid"] == 42
    assert document["written_at"].endswith("Z")
    assert document["fail_closed_events"] == ["beforeShellExecution", "preToolUse"]
    assert document["sources"] == {
        "beforeShellExecution": ["enterprise", "project"],
        "preToolUse": ["project"],
    }
    assert stat.S_IMODE((run / POLICY_FILE).stat().st_mode) == 0o644
    assert not [p for p in run.iterdir() if p.name != POLICY_FILE]  # no temporary left


def test_written_again_only_when_the_union_changes(layout: Path) -> None:
    run = layout / "run"
    run.mkdir()
    book = PolicyBook(run, daemon_id="w")
    book.observe("default", layout / "repo", _sources(layout))
    book.observe("default", layout / "repo", _sources(layout))
    assert book.writes == 1
    # a second workspace with the same events: the union is the same
    book.observe("other", layout / "repo", _sources(layout))
    assert book.writes == 1
    # a reload that drops the project's failClosed hooks: still the enterprise one
    _write(layout / "repo" / ".cursor" / "hooks.json", {"stop": [{"command": "s"}]})
    book.observe("default", layout / "repo", _sources(layout))
    assert book.writes == 1  # "other" still has them
    book.forget("other")
    assert book.writes == 2
    document = json.loads((run / POLICY_FILE).read_text())
    assert document["fail_closed_events"] == ["beforeShellExecution"]
    assert document["sources"] == {"beforeShellExecution": ["enterprise"]}


def test_a_workspace_replaces_the_entry_without_one(layout: Path) -> None:
    run = layout / "run"
    run.mkdir()
    book = PolicyBook(run, daemon_id="w")
    operator_only = load_sources(
        SourceSettings(workspace=None, enterprise_path=layout / "etc" / "hooks.json")
    )
    book.observe("default", None, operator_only)
    assert book.publish()
    assert set(book.events()) == {"beforeShellExecution"}
    # the enterprise hook goes away; the workspace's load carries the new version
    _write(layout / "etc" / "hooks.json", {"stop": [{"command": "s"}]})
    _write(layout / "repo" / ".cursor" / "hooks.json", {"stop": [{"command": "s"}]})
    book.observe("default", layout / "repo", _sources(layout))
    assert book.events() == {}
    assert json.loads((run / POLICY_FILE).read_text())["fail_closed_events"] == []


def test_a_symlink_planted_as_the_policy_file_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    (tmp_path / POLICY_FILE).symlink_to(victim)
    write_policy(tmp_path / POLICY_FILE, {"version": 1})
    assert victim.read_text() == "keep me\n"
    assert not (tmp_path / POLICY_FILE).is_symlink()
    assert json.loads((tmp_path / POLICY_FILE).read_text()) == {"version": 1}


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any permission")
def test_a_directory_the_daemon_cannot_write_is_one_warning_not_a_crash(
    layout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = layout / "run"
    run.mkdir()
    run.chmod(0o500)
    try:
        book = PolicyBook(run, daemon_id="w")
        book.observe("default", layout / "repo", _sources(layout))
        assert not book.publish()
    finally:
        run.chmod(0o700)
    warnings = _log_lines(capsys)
    assert [w["event"] for w in warnings] == ["daemon.fail_policy_unpublished"]
    assert warnings[0]["problem"].startswith("the fail policy could not be published")
    assert "Permission denied" in warnings[0]["problem"] and str(run) in warnings[0]["problem"]
    assert book.problem is not None
    assert not (run / POLICY_FILE).exists()
    # writable again: the next change (or start) publishes it
    assert book.publish()
    assert book.problem is None


def test_a_run_directory_that_is_not_there_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    book = PolicyBook(tmp_path / "gone", daemon_id="w")
    assert not book.publish()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No such file or directory" in err


def test_a_directory_in_place_of_the_file_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / POLICY_FILE).mkdir()
    book = PolicyBook(tmp_path, daemon_id="w")
    assert not book.publish()
    assert "cannot write" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == [POLICY_FILE]  # the temporary is gone


def test_unchanged_sources_cost_no_work(layout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = layout / "run"
    run.mkdir()
    book = PolicyBook(run, daemon_id="w")
    sources = _sources(layout)
    book.observe("default", layout / "repo", sources)
    calls = []
    monkeypatch.setattr(
        "cloudrunner.daemon.fail_policy.fail_closed_sources",
        lambda s: calls.append(s) or {},
    )
    for _ in range(3):
        book.observe("default", layout / "repo", _sources(layout))
    assert calls == []


def _log_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """The daemon's log lines on stderr (JSON, stderr not being a terminal), each parsed."""
    return [json.loads(line) for line in capsys.readouterr().err.strip().splitlines()]


def test_a_policy_place_taken_by_a_directory_is_one_log_warning_and_retried(
    layout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = layout / "run"
    (run / POLICY_FILE).mkdir(parents=True)
    book = PolicyBook(run, daemon_id="w")
    book.observe("default", layout / "repo", _sources(layout), publish=False)
    assert not book.publish()
    warnings = _log_lines(capsys)
    assert [(w["event"], w["level"]) for w in warnings] == [
        ("daemon.fail_policy_unpublished", "warning")
    ]
    assert str(run / POLICY_FILE) in warnings[0]["problem"]
    assert "make the directory writable" in warnings[0]["problem"]
    assert book.problem == warnings[0]["problem"], "the warning says the problem readyz gives"
    (run / POLICY_FILE).rmdir()
    assert book.publish()
    assert book.problem is None and json.loads((run / POLICY_FILE).read_text())["version"] == 1
