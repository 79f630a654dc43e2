"""No settings path depends on where the process starts: a settings file's relative paths
are relative to the file; a variable's or flag's must be absolute; managed hooks never lie
inside the workspace."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.settings import SettingsError, load_settings, path_keys
from cloudrunner.sources import SourceSettings, SourceStatus, load_sources


def test_every_path_key_is_known() -> None:
    keys = path_keys()
    for key in ("sources.team_hooks", "sources.enterprise_hooks", "audit.path", "state_dir"):
        assert key in keys


def test_relative_paths_of_a_file_are_relative_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "etc" / "config.toml"
    conf.parent.mkdir()
    conf.write_text(
        'state_dir = "state"\n[sources]\nteam_hooks = "team"\nenterprise_hooks = "../ent/h.json"\n'
        '[audit]\npath = "logs/audit.log"\n'
    )
    elsewhere = tmp_path / "somewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    got = load_settings(conf, environ={})
    assert got.sources.team_hooks == tmp_path / "etc" / "team"
    assert got.sources.enterprise_hooks == tmp_path / "etc" / ".." / "ent" / "h.json"
    assert got.audit.path == tmp_path / "etc" / "logs" / "audit.log"
    assert got.state_dir == tmp_path / "etc" / "state"


@pytest.mark.parametrize(
    ("variable", "key"),
    [("CLOUDRUNNER_TEAM_HOOKS", "sources.team_hooks"), ("CLOUDRUNNER_AUDIT_LOG", "audit.path"),
     ("CLOUDRUNNER_STATE_DIR", "state_dir")],
)  # fmt: skip
def test_a_relative_path_in_a_variable_is_refused_naming_it(variable: str, key: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(Path(os.devnull), environ={variable: "team"})
    message = caught.value.message
    assert variable in message and key in message and "\n" not in message


def test_a_relative_path_from_a_flag_is_refused_naming_the_key() -> None:
    with pytest.raises(SettingsError, match=r"sources\.team_hooks.*relative path 'team'"):
        load_settings(Path(os.devnull), environ={}, overrides={"sources.team_hooks": Path("team")})


def test_absolute_paths_from_variables_are_kept(tmp_path: Path) -> None:
    got = load_settings(Path(os.devnull), environ={"CLOUDRUNNER_TEAM_HOOKS": str(tmp_path)})
    assert got.sources.team_hooks == tmp_path


@pytest.mark.parametrize("key", ["team_hooks", "enterprise_hooks"])
def test_managed_hooks_inside_the_workspace_are_refused_at_load(tmp_path: Path, key: str) -> None:
    conf = tmp_path / "config.toml"
    (tmp_path / "repo" / "team").mkdir(parents=True)
    conf.write_text(f'[sources]\n{key} = "repo/team"\n[workspace]\npath = "repo"\n')
    with pytest.raises(SettingsError, match=f"sources.{key}: .* lies inside the workspace"):
        load_settings(conf, environ={})


def _repo_with_team(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "team").mkdir(parents=True)
    hooks = {"version": 1, "hooks": {"stop": [{"command": "echo repository-chosen"}]}}
    (repo / "team" / "hooks.json").write_text(json.dumps(hooks))
    return repo


def test_managed_hooks_inside_the_workspace_are_refused_at_event_time(tmp_path: Path) -> None:
    """The workspace may come with the event (a payload's workspace root): checked on
    every load, through symbolic links too."""
    repo = _repo_with_team(tmp_path)
    os.symlink(repo / "team", tmp_path / "team-link")
    for team in (repo / "team", tmp_path / "team-link", repo / "team" / "hooks.json"):
        got = load_sources(SourceSettings(workspace=repo, team_path=team)).source(SourceKind.TEAM)
        assert got.status is SourceStatus.BROKEN
        assert got.hooks == {}
        assert got.diagnostics[0].code == "managed-path-refused"
        assert "inside the workspace" in got.diagnostics[0].message
    enterprise = load_sources(
        SourceSettings(workspace=repo, enterprise_path=repo / "team" / "hooks.json")
    ).source(SourceKind.ENTERPRISE)
    assert enterprise.status is SourceStatus.BROKEN


def test_a_relative_team_path_never_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo_with_team(tmp_path)
    monkeypatch.chdir(repo)
    got = load_sources(SourceSettings(workspace=None, team_path=Path("team"))).source(
        SourceKind.TEAM
    )
    assert got.status is SourceStatus.BROKEN
    assert "relative path" in got.diagnostics[0].message
