"""The operator's allowlist of daemon variables passed to hooks (pure, no Docker)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.event.hook_env import RESERVED, check_entry, resolve, resolve_all
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.settings import SettingsError, load_settings

DAEMON = {
    "CI": "true",
    "DEPLOY_ENV": "staging",
    "DEPLOY_REGION": "eu",
    "DEPLOY_TOKEN": "t0ps3cret",
    "DEPLOY_PASSWORD": "hunter2",
    "GITHUB_TOKEN": "ghp_x",
    "CLOUDRUNNER_GIT_TOKEN": "git-secret",
    "PATH": "/usr/bin",
}


def test_names_and_prefixes_pass_and_credentials_need_their_exact_name() -> None:
    passed = resolve(["CI", "DEPLOY_*", "GITHUB_TOKEN", "ABSENT"], DAEMON)
    assert passed.values == {
        "CI": "true", "DEPLOY_ENV": "staging", "DEPLOY_REGION": "eu", "GITHUB_TOKEN": "ghp_x",
    }  # fmt: skip
    assert set(passed.refused) == {"DEPLOY_TOKEN", "DEPLOY_PASSWORD"}
    assert "list it by its exact name" in passed.refused["DEPLOY_TOKEN"]
    assert passed.missing == ("ABSENT",)
    # listed by its exact name, a credential-looking name passes
    assert resolve(["DEPLOY_TOKEN"], DAEMON).values == {"DEPLOY_TOKEN": "t0ps3cret"}


def test_the_record_holds_names_never_values() -> None:
    record = resolve(["CI", "DEPLOY_*", "GITHUB_TOKEN", "ABSENT"], DAEMON).record()
    assert record == {
        "passed": ["CI", "DEPLOY_ENV", "DEPLOY_REGION", "GITHUB_TOKEN"],
        "refused": [
            {"name": "DEPLOY_PASSWORD", "reason": record["refused"][0]["reason"]},  # type: ignore[index]
            {"name": "DEPLOY_TOKEN", "reason": record["refused"][1]["reason"]},  # type: ignore[index]
        ],
        "missing": ["ABSENT"],
    }
    text = repr(record)
    assert not any(value in text for value in DAEMON.values() if len(value) > 3)


def test_a_prefix_never_passes_the_daemons_own_or_the_protocols_variables() -> None:
    passed = resolve(["CLOUD*", "PAT*"], DAEMON)
    assert passed.values == {}
    assert set(passed.refused) == {"CLOUDRUNNER_GIT_TOKEN", "PATH"}


def test_only_sources_with_entries_are_resolved() -> None:
    entries = {"project": ["CI"], "enterprise": []}
    got = resolve_all(lambda kind: entries.get(kind, []), DAEMON)
    assert list(got) == [SourceKind.PROJECT]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("*", "whole environment"), ("CLOUDRUNNER_GIT_TOKEN", "daemon's own settings"),
        ("cloudrunner_*", "daemon's own settings"), ("HOME", "set by the protocol"),
        ("CURSOR_PROJECT_DIR", "set by the protocol"), ("1CI", "not a variable name"),
        ("A*B", "not a variable name"), ("CI ", "not a variable name"), ("", "not a variable"),
        ("A-B", "not a variable name"), ("A=B", "not a variable name"),
    ],
)  # fmt: skip
def test_bad_entries_are_refused_naming_the_problem(entry: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_entry(entry)


def test_settings_name_the_key_and_the_problem(tmp_path: Path) -> None:
    config = tmp_path / "cloudrunner.toml"
    config.write_text('[hook_env]\nproject = ["CI", "DEPLOY_*"]\nteam = ["X"]\n')
    settings = load_settings(config, environ={})
    assert settings.hook_env.entries("project") == ["CI", "DEPLOY_*"]
    assert settings.hook_env.entries("enterprise") == []
    config.write_text('[hook_env]\nproject = ["CLOUDRUNNER_GIT_TOKEN"]\n')
    with pytest.raises(SettingsError) as bad:
        load_settings(config, environ={})
    assert "hook_env.project" in bad.value.message and "daemon's own" in bad.value.message
    config.write_text('[hook_env]\nprojects = ["CI"]\n')
    with pytest.raises(SettingsError):
        load_settings(config, environ={})


@given(
    st.lists(st.from_regex(r"[A-Z_][A-Z0-9_]{0,12}\*?", fullmatch=True), max_size=8),
    st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True),
                    st.text(max_size=8), max_size=12),
)  # fmt: skip
def test_nothing_reserved_or_credential_like_passes_unless_named(
    entries: list[str], environ: dict[str, str]
) -> None:
    from cloudrunner.audit.redaction import is_secret_name

    passed = resolve(entries, environ)
    for name in passed.values:
        assert name in environ
        if name not in entries:
            assert not is_secret_name(name) and name not in RESERVED
            assert not name.upper().startswith("CLOUDRUNNER_")
    assert not set(passed.values) & set(passed.refused)
