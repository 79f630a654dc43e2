from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from cloudrunner.settings import SettingsError, default_toml, load_settings, to_toml
from cloudrunner.sources import DEFAULT_ENTERPRISE_PATH


def test_defaults_follow_the_spec_decisions() -> None:
    s = load_settings(environ={})
    assert s.profile == "cloud"
    assert s.hook_timeout == 60.0
    assert s.sources.trust_project_hooks is True
    # the fleet's hooks have a file of their own: /etc/cursor/hooks.json is the agent's, whose
    # hooks call the daemon (issue 32)
    assert s.sources.enterprise_hooks == Path("/etc/cloudrunner/enterprise-hooks.json")
    assert s.sources.enterprise_hooks == DEFAULT_ENTERPRISE_PATH
    assert s.sandbox.network == "none"
    assert s.audit_path == s.state_dir / "audit.log"


def test_layers_override_in_order_file_env_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('profile = "desktop"\nhook_timeout = 5\n[sandbox]\nruntime = "runsc"\n')
    s = load_settings(cfg, environ={})
    assert (s.profile, s.hook_timeout, s.sandbox.runtime) == ("desktop", 5.0, "runsc")
    s = load_settings(cfg, environ={"CLOUDRUNNER_PROFILE": "cloud"})
    assert s.profile == "cloud"
    assert s.hook_timeout == 5.0
    s = load_settings(
        cfg, environ={"CLOUDRUNNER_PROFILE": "cloud"}, overrides={"profile": "desktop"}
    )
    assert s.profile == "desktop"


def test_config_env_variable_names_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path}"\n')
    assert load_settings(environ={"CLOUDRUNNER_CONFIG": str(cfg)}).state_dir == tmp_path


def test_unknown_key_in_file_is_an_error_naming_file_and_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[sandbox]\nmemroy = 5\n")
    with pytest.raises(SettingsError) as err:
        load_settings(cfg, environ={})
    assert str(cfg) in str(err.value)
    assert "sandbox.memroy: unknown key" in str(err.value)


def test_bad_toml_and_missing_file_are_clear(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("profile = \n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(cfg, environ={})
    with pytest.raises(SettingsError, match="config init"):
        load_settings(tmp_path / "nope.toml", environ={})


def test_bad_env_value_names_the_variables() -> None:
    with pytest.raises(SettingsError, match=r"environment variables.*profile"):
        load_settings(environ={"CLOUDRUNNER_PROFILE": "laptop"})


def test_per_source_overrides_merge_limits_and_refuse_project_network() -> None:
    s = load_settings(
        environ={},
        overrides={
            "sandbox.per_source": {"enterprise": {"network": "corp", "limits": {"pids": 99}}}
        },
    )
    ent = s.sandbox.profile_for("enterprise")
    assert ent.network == "corp"
    assert ent.limits.pids == 99
    assert ent.limits.memory == s.sandbox.limits.memory
    assert s.sandbox.profile_for("project").network == "none"
    with pytest.raises(SettingsError, match="project hooks get no network"):
        load_settings(
            environ={}, overrides={"sandbox.per_source": {"project": {"network": "corp"}}}
        )


def test_hooks_never_run_as_root_by_settings() -> None:
    with pytest.raises(SettingsError, match="never run as uid"):
        load_settings(environ={}, overrides={"sandbox.user": 0})


def test_default_file_is_valid_commented_toml_and_show_round_trips(tmp_path: Path) -> None:
    text = default_toml()
    assert text.count("\n# ") > 10
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    s = load_settings(cfg, environ={})
    assert tomllib.loads(to_toml(s)) == tomllib.loads(to_toml(load_settings(environ={})))


def test_the_documented_settings_example_is_valid(tmp_path: Path) -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "guides" / "operate.md"
    # the block's fence may carry a title: ```toml title="..."
    block = guide.read_text().split("```toml", 1)[1].split("\n", 1)[1].split("```", 1)[0]
    cfg = tmp_path / "c.toml"
    cfg.write_text(block)
    s = load_settings(cfg, environ={})
    assert s.sandbox.profile_for("enterprise").network == "corp-tools"
    assert s.sandbox.profile_for("project").network == "none"
