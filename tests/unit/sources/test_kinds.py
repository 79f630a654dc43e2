"""The registry of source kinds: every kind loads through one loader, in priority order, and
a loader added to the registry is all a new kind needs."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from cloudrunner.protocol.diagnostics import info
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.sources import (
    LOADERS,
    LoadedSource,
    SourceSettings,
    SourceStatus,
    forget_loaded_sources,
    load_sources,
    loading,
)


def test_each_cursor_kind_has_one_loader_in_priority_order() -> None:
    kinds = [getattr(loader, "KIND", None) for loader in LOADERS]
    assert [k for k in kinds if k is not None] == list(SourceKind)


def test_a_set_lists_its_sources_in_rank_order(tmp_path: Path) -> None:
    forget_loaded_sources()
    settings = SourceSettings(
        workspace=tmp_path, profile=Profile.DESKTOP, user_home=tmp_path, claude_code=True
    )
    ranks = [s.rank for s in load_sources(settings).sources]
    assert ranks == sorted(ranks)
    assert [s.kind for s in load_sources(settings).sources][:4] == list(SourceKind)


def test_a_loader_added_to_the_registry_loads_with_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = info("source-absent", "the new kind has no file")
    extra = LoadedSource(SourceKind.USER, None, None, SourceStatus.ABSENT, None, None, {}, (note,))
    new_kind = types.SimpleNamespace(load=lambda settings: (extra,))
    silent = types.SimpleNamespace(load=lambda settings: ())
    monkeypatch.setattr(loading, "LOADERS", (*LOADERS, silent, new_kind))
    forget_loaded_sources()
    got = load_sources(SourceSettings(workspace=tmp_path)).sources
    assert got[-1] is extra
    assert len(got) == len(SourceKind) + 1
    forget_loaded_sources()


def test_a_kind_the_operator_does_not_allow_never_reaches_its_file(tmp_path: Path) -> None:
    """The hostile case: a workspace's hooks file is not even read when project hooks are
    not allowed (a refused symlink would otherwise say so)."""
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor" / "hooks.json").symlink_to("/etc/passwd")
    forget_loaded_sources()
    settings = SourceSettings(workspace=tmp_path, allowed=frozenset({SourceKind.ENTERPRISE}))
    project = load_sources(settings).source(SourceKind.PROJECT)
    assert project.status is SourceStatus.SKIPPED
    assert [d.code for d in project.diagnostics] == ["source-not-allowed"]
    forget_loaded_sources()
