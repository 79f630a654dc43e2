"""A long-lived worker's remembered source loads: an unchanged file is not read again, any
change (content, replacement, symlink, moved directory) is seen on the very next load."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sources import (
    LoadedSource,
    SourceSettings,
    SourceStatus,
    files,
    load_sources,
    loading,
)


def document(command: str) -> bytes:
    return json.dumps({"version": 1, "hooks": {"stop": [{"command": command}]}}).encode()


def project(settings: SourceSettings) -> LoadedSource:
    return load_sources(settings).source(SourceKind.PROJECT)


def project_commands(settings: SourceSettings) -> list[str]:
    return [e.definition.command or "" for e in project(settings).hooks.get("stop", ())]


def refused(source: LoadedSource) -> str:
    """The code of the refusal that left `source` unloaded (broken)."""
    assert source.status is SourceStatus.BROKEN
    return source.diagnostics[0].code


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    loading.forget_loaded_sources()
    yield
    loading.forget_loaded_sources()


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file counts as settled (older than `RACY_NS`), so a load may be remembered."""
    monkeypatch.setattr(files, "RACY_NS", -(10**18))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".cursor").mkdir(parents=True)
    (repo / ".cursor" / "hooks.json").write_bytes(document("first"))
    return repo


class Reads:
    """Counts the project hooks file's actual reads (the real reader runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = files.read_hooks_bytes

        def counting(path: Path, root: Path) -> bytes:
            if path.parent.name == ".cursor":
                self.count += 1
            return real(path, root)

        monkeypatch.setattr(files, "read_hooks_bytes", counting)


@pytest.mark.usefixtures("settled")
def test_an_unchanged_settled_file_is_read_once(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    settings = SourceSettings(workspace=repo)
    first = project(settings)
    second = project(settings)
    assert second is first and reads.count == 1
    assert first.status is SourceStatus.LOADED


def test_a_recently_changed_file_is_read_on_every_load(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same size, same mtime: the times of a just-written file cannot tell the edit apart,
    so a file changed within RACY_NS (2 s) is never remembered."""
    reads = Reads(monkeypatch)
    settings = SourceSettings(workspace=repo)
    hooks = repo / ".cursor" / "hooks.json"
    assert project_commands(settings) == ["first"]
    before = os.stat(hooks)
    with open(hooks, "r+b") as fh:  # in place: same inode, same size
        fh.write(document("again"))
    os.utime(hooks, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert project_commands(settings) == ["again"]
    assert reads.count == 2


@pytest.mark.usefixtures("settled")
def test_a_changed_file_is_read_again_and_its_hash_checked(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    settings = SourceSettings(workspace=repo)
    hooks = repo / ".cursor" / "hooks.json"
    first = project(settings)
    # Touched, same bytes: read again, same hash, same hooks.
    os.utime(hooks, ns=(1, 10**18))
    touched = project(settings)
    assert reads.count == 2 and touched.sha256 == first.sha256 and touched.hooks == first.hooks
    # Replaced by rename (how editors and git write): the new content.
    new = hooks.with_name("new.json")
    new.write_bytes(document("second, longer"))
    new.replace(hooks)
    assert project_commands(settings) == ["second, longer"]
    # Deleted: absent at once.
    hooks.unlink()
    assert project(settings).status is SourceStatus.ABSENT


@pytest.mark.usefixtures("settled")
def test_a_remembered_file_swapped_for_an_escaping_symlink_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    settings = SourceSettings(workspace=repo)
    assert project_commands(settings) == ["first"]
    outside = tmp_path / "outside.json"
    outside.write_bytes(document("evil"))
    hooks = repo / ".cursor" / "hooks.json"
    hooks.unlink()
    hooks.symlink_to(outside)
    assert refused(project(settings)) == "symlink-escape"


@pytest.mark.usefixtures("settled")
def test_a_remembered_directory_swapped_for_an_escaping_symlink_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    settings = SourceSettings(workspace=repo)
    assert project_commands(settings) == ["first"]
    # The very same file (a hard link) reached through a .cursor that now points outside.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.link(repo / ".cursor" / "hooks.json", elsewhere / "hooks.json")
    (repo / ".cursor").rename(tmp_path / "old-cursor")
    (repo / ".cursor").symlink_to(elsewhere)
    assert refused(project(settings)) == "symlink-escape"


@pytest.mark.usefixtures("settled")
def test_each_source_and_profile_is_remembered_apart(repo: Path, tmp_path: Path) -> None:
    team = tmp_path / "team.json"
    team.write_bytes(document("team"))
    trusting = SourceSettings(workspace=repo, team_path=team)
    untrusting = SourceSettings(workspace=repo, team_path=team, trust_workspace=False)
    assert project_commands(trusting) == ["first"]
    assert project_commands(untrusting) == []
    loaded = load_sources(trusting)
    assert [e.definition.command for e in loaded.source(SourceKind.TEAM).hooks["stop"]] == ["team"]


# commands of letters and digits: a blank command is invalid, which is another test's matter
COMMANDS = st.text(st.characters(whitelist_categories=("L", "N")), min_size=1, max_size=40)


@settings(max_examples=30, deadline=None)
@given(st.lists(COMMANDS, min_size=1, max_size=6))
def test_every_edit_is_seen_on_the_next_load(tmp_path_factory: pytest.TempPathFactory,
                                             commands: list[str]) -> None:  # fmt: skip
    """Whatever the sequence of edits (sizes equal or not, as fast as they come), each load
    answers the file's current content."""
    repo = tmp_path_factory.mktemp("repo")
    (repo / ".cursor").mkdir()
    hooks = repo / ".cursor" / "hooks.json"
    settings_ = SourceSettings(workspace=repo)
    for command in commands:
        hooks.write_bytes(document(command))
        assert project_commands(settings_) == [command]


@pytest.mark.parametrize(
    "fresh",
    ["link_mtime_ns", "link_ctime_ns", "mtime_ns", "ctime_ns", "dir_mtime_ns", "dir_ctime_ns",
     "root_mtime_ns", "root_ctime_ns"],
)  # fmt: skip
def test_any_recent_time_in_the_guard_keeps_a_load_unsettled(fresh: str) -> None:
    """Every time the guard holds counts, by name: a recent one means read it again."""
    from cloudrunner.sources import RACY_NS, DirIdentity, FileIdentity, LoadGuard

    now = 10 * RACY_NS
    old = now - 2 * RACY_NS
    file_times = {k: old for k in ("link_mtime_ns", "link_ctime_ns", "mtime_ns", "ctime_ns")}
    dir_times = {"mtime_ns": old, "ctime_ns": old}
    root_times = dict(dir_times)
    if fresh in file_times:
        file_times[fresh] = now
    elif fresh.startswith("dir_"):
        dir_times[fresh.removeprefix("dir_")] = now
    else:
        root_times[fresh.removeprefix("root_")] = now
    file = FileIdentity(link_ino=1, dev=2, ino=3, size=4, **file_times)
    guard = LoadGuard(file, DirIdentity(dev=2, ino=5, **dir_times), DirIdentity(2, 6, old, old))
    guard = guard._replace(root=DirIdentity(dev=2, ino=6, **root_times))
    assert not guard.settled(now)
    settled = LoadGuard(
        FileIdentity(1, old, old, 2, 3, 4, old, old),
        DirIdentity(2, 5, old, old),
        DirIdentity(2, 6, old, old),
    )
    assert settled.settled(now)


@pytest.mark.usefixtures("settled")
def test_an_unchanged_set_is_answered_without_its_loaders(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = SourceSettings(workspace=repo)
    first = load_sources(settings)
    calls: list[SourceSettings] = []
    real = loading._load_all
    monkeypatch.setattr(loading, "_load_all", lambda s: calls.append(s) or real(s))
    assert load_sources(SourceSettings(workspace=repo)) is first
    assert calls == []
    (repo / ".cursor" / "hooks.json").write_bytes(document("second"))
    assert project_commands(settings) == ["second"]
    assert len(calls) == 1


def test_a_set_with_an_unsettled_file_is_loaded_again_each_time(repo: Path) -> None:
    settings = SourceSettings(workspace=repo)  # the hooks file was just written
    assert load_sources(settings) is not load_sources(settings)


@pytest.mark.usefixtures("settled")
def test_a_pinned_project_set_is_never_remembered(repo: Path) -> None:
    """The digest of a pinned project covers its scripts, which no glance watches."""
    settings = SourceSettings(workspace=repo, project_digests=frozenset({"sha256:0"}))
    assert load_sources(settings) is not load_sources(settings)
    assert len(loading._sets) == 0


@pytest.mark.usefixtures("settled")
def test_operator_hooks_moved_into_the_workspace_by_a_link_above_them_are_refused(
    repo: Path, tmp_path: Path
) -> None:
    """The operator's directory is reached through a symlink that is later pointed into
    the workspace, at a directory holding the very same file (a hard link): the file, its
    directory and its root keep their identities, and the real path tells."""
    managed = tmp_path / "managed" / "cursor"
    managed.mkdir(parents=True)
    (managed / "hooks.json").write_bytes(document("operator"))
    inside_repo = repo / "vendored" / "cursor"
    inside_repo.mkdir(parents=True)
    os.link(managed / "hooks.json", inside_repo / "hooks.json")
    via = tmp_path / "via"
    via.symlink_to(tmp_path / "managed")
    settings = SourceSettings(workspace=repo, enterprise_path=via / "cursor" / "hooks.json")
    assert load_sources(settings).source(SourceKind.ENTERPRISE).status is SourceStatus.LOADED
    via.unlink()
    via.symlink_to(repo / "vendored")
    enterprise = load_sources(settings).source(SourceKind.ENTERPRISE)
    assert refused(enterprise) == "managed-path-refused"


@pytest.mark.usefixtures("settled")
def test_a_claude_file_appearing_while_claude_code_is_off_is_reported(repo: Path) -> None:
    settings = SourceSettings(workspace=repo)
    before = load_sources(settings)
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text("{}")
    after = load_sources(settings)
    assert after is not before
    codes = [d.code for d in after.diagnostics]
    assert "claude-code-off" in codes and "claude-code-off" not in [
        d.code for d in before.diagnostics
    ]
