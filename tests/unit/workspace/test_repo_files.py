"""Files read from a repository must resolve inside it; a refusal quotes nothing of the file
outside."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudrunner import validate
from cloudrunner.images import project_image as environment
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.workspace.repo_files import (
    RepoFileRefused,
    inside,
    read_inside,
    real_path,
    resolves_inside,
)

SECRET = "TOPSECRET-4f1d-outside-value"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".cursor").mkdir(parents=True)
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "host-secret.json"
    secret.write_text(json.dumps({"build": {"dockerfile": SECRET}, SECRET: SECRET}))
    return secret


def test_a_file_inside_is_read(repo: Path) -> None:
    (repo / "a").write_bytes(b"content")
    assert read_inside(repo / "a", repo, max_bytes=100) == b"content"


def test_a_symlink_inside_the_repository_is_followed(repo: Path) -> None:
    (repo / "real").write_bytes(b"x")
    (repo / ".cursor" / "link").symlink_to(repo / "real")
    assert read_inside(repo / ".cursor" / "link", repo, max_bytes=100) == b"x"


def test_a_symlink_outside_is_refused_without_its_content(repo: Path, outside: Path) -> None:
    (repo / "link").symlink_to(outside)
    with pytest.raises(RepoFileRefused) as caught:
        read_inside(repo / "link", repo, max_bytes=100)
    assert caught.value.code == "symlink-escape"
    assert SECRET not in caught.value.message


def test_a_relative_symlink_climbing_out_is_refused(repo: Path, outside: Path) -> None:
    (repo / ".cursor" / "hooks.json").symlink_to(Path("..") / ".." / outside.name)
    with pytest.raises(RepoFileRefused, match="outside"):
        read_inside(repo / ".cursor" / "hooks.json", repo, max_bytes=1000)


def test_a_symlinked_directory_leading_out_is_refused(tmp_path: Path, repo: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "environment.json").write_text("{}")
    (repo / "sub").symlink_to(elsewhere)
    with pytest.raises(RepoFileRefused, match="outside"):
        read_inside(repo / "sub" / "environment.json", repo, max_bytes=100)


def test_absent_dangling_fifo_and_size(repo: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_inside(repo / "none", repo, max_bytes=10)
    (repo / "dangling").symlink_to(repo / "gone")
    with pytest.raises(RepoFileRefused) as caught:
        read_inside(repo / "dangling", repo, max_bytes=10)
    assert caught.value.code == "dangling-symlink"
    os.mkfifo(repo / "fifo")
    with pytest.raises(RepoFileRefused) as caught:
        read_inside(repo / "fifo", repo, max_bytes=10)
    assert caught.value.code == "not-regular"
    (repo / "big").write_bytes(b"x" * 11)
    with pytest.raises(RepoFileRefused) as caught:
        read_inside(repo / "big", repo, max_bytes=10, limit="10 B")
    assert caught.value.code == "too-large" and "10 B" in caught.value.message


def test_a_prefix_of_the_root_is_not_inside() -> None:
    assert inside("/r/a", "/r") and inside("/r", "/r")
    assert not inside("/repo-other/a", "/repo")
    assert not inside("/re", "/repo")


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(["..", ".", "sub", "x", "repo", "outside"]), min_size=1, max_size=6)
)
def test_whatever_a_symlink_points_at_only_files_inside_are_read(
    tmp_path: Path, parts: list[str]
) -> None:
    base = tmp_path / f"case-{abs(hash(tuple(parts)))}"
    root = base / "repo"
    (root / "sub").mkdir(parents=True, exist_ok=True)
    (root / "x").write_text("inside")
    (root / "sub" / "x").write_text("inside")
    (base / "x").write_text(SECRET)
    (base / "outside").mkdir(exist_ok=True)
    (base / "outside" / "x").write_text(SECRET)
    link = root / "sub" / "link"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(os.path.join(*parts))
    try:
        data = read_inside(link, root, max_bytes=100)
    except (FileNotFoundError, RepoFileRefused) as exc:
        assert SECRET not in str(exc)
    else:
        assert data == b"inside"
        assert resolves_inside(link, root)


# ------------------------------------------------------------------ environment.json


def test_environment_json_symlinked_outside_is_refused_quoting_nothing(
    repo: Path, outside: Path
) -> None:
    (repo / ".cursor" / "environment.json").symlink_to(outside)
    with pytest.raises(environment.EnvironmentFileError) as caught:
        environment.load_environment(repo)
    assert "outside" in caught.value.message
    assert SECRET not in caught.value.message


def test_environment_json_that_is_not_utf8_names_the_byte(repo: Path) -> None:
    (repo / ".cursor" / "environment.json").write_bytes(b'{"name": "\xff"}')
    with pytest.raises(environment.EnvironmentFileError, match="not UTF-8"):
        environment.load_environment(repo)


def test_a_dockerfile_symlinked_outside_is_refused(
    tmp_path: Path, repo: Path, outside: Path
) -> None:
    (repo / ".cursor" / "environment.json").write_text('{"build": {"dockerfile": "Dockerfile"}}')
    (repo / ".cursor" / "Dockerfile").symlink_to(outside)
    env = environment.load_environment(repo)
    assert env is not None
    with pytest.raises(environment.EnvironmentFileError) as caught:
        environment.resolve_build(env)
    assert "outside the repository" in caught.value.message
    assert SECRET not in caught.value.message


def test_a_dockerignore_symlinked_outside_is_refused(repo: Path, outside: Path) -> None:
    (repo / ".cursor" / "environment.json").write_text('{"build": {"dockerfile": "Dockerfile"}}')
    (repo / ".cursor" / "Dockerfile").write_text("FROM scratch\n")
    (repo / ".cursor" / ".dockerignore").symlink_to(outside)
    env = environment.load_environment(repo)
    assert env is not None
    inputs = environment.resolve_build(env)
    with pytest.raises(environment.EnvironmentFileError) as caught:
        environment.context_files(inputs)
    assert "outside" in caught.value.message and SECRET not in caught.value.message


# ------------------------------------------------------------------ validate: hook scripts


def test_validate_warns_about_a_hook_script_that_leads_outside(repo: Path, outside: Path) -> None:
    (repo / ".cursor" / "hooks").mkdir()
    (repo / ".cursor" / "hooks" / "guard.sh").symlink_to(outside)
    (repo / ".cursor" / "hooks" / "fine.sh").write_text("#!/bin/sh\n")
    (repo / ".cursor" / "hooks.json").write_text(
        json.dumps(
            {
                "version": 1,
                "hooks": {
                    "stop": [
                        {"command": ".cursor/hooks/guard.sh"},
                        {"command": ".cursor/hooks/fine.sh"},
                    ]
                },
            }
        )
    )
    target = validate.resolve_target(repo)
    report = validate.validate_file(target, Profile.CLOUD, SourceKind.PROJECT)
    codes = [d.code for d in report.diagnostics]
    assert codes.count("script-outside") == 1
    (note,) = [d for d in report.diagnostics if d.code == "script-outside"]
    assert "guard.sh" in note.message and SECRET not in note.message


# ------------------------------------------------------------------ the build context sent


def _environment(repo: Path, build: dict[str, str]) -> environment.BuildInputs:
    (repo / ".cursor" / "environment.json").write_text(json.dumps({"build": build}))
    env = environment.load_environment(repo)
    assert env is not None
    return environment.resolve_build(env)


def _members(archive: Any) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=archive) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_the_context_archive_holds_files_and_keeps_links_as_links(
    repo: Path, outside: Path
) -> None:
    cursor = repo / ".cursor"
    (cursor / "Dockerfile").write_text("FROM scratch\nCOPY . /ctx\n")
    (cursor / "sub").mkdir()
    (cursor / "sub" / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    (cursor / "sub" / "tool.sh").chmod(0o755)
    (cursor / "host-secret").symlink_to(outside)
    archive, dockerfile = environment.context_archive(
        _environment(repo, {"dockerfile": "Dockerfile"})
    )
    with archive:
        raw = archive.read()
        archive.seek(0)
        members = _members(archive)
    assert dockerfile == "Dockerfile"
    assert members["sub"].isdir()
    assert members["sub/tool.sh"].isfile() and members["sub/tool.sh"].mode & 0o111
    link = members["host-secret"]
    assert link.issym() and link.linkname == str(outside)
    assert SECRET.encode() not in raw


def test_a_dockerfile_outside_the_context_travels_under_its_own_name(repo: Path) -> None:
    cursor = repo / ".cursor"
    (cursor / "ctx").mkdir()
    (cursor / "ctx" / "data").write_text("d")
    (cursor / "Dockerfile").write_text("FROM scratch\n")
    inputs = _environment(repo, {"dockerfile": "Dockerfile", "context": "ctx"})
    archive, dockerfile = environment.context_archive(inputs)
    with archive, tarfile.open(fileobj=archive) as tar:
        names = tar.getnames()
        extracted = tar.extractfile(dockerfile)
        assert extracted is not None and extracted.read() == b"FROM scratch\n"
    assert dockerfile.startswith(".dockerfile.") and sorted(names) == sorted(["data", dockerfile])


def test_a_context_file_swapped_for_a_symlink_after_the_listing_is_refused(
    repo: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: the file was regular when listed, a link to the host when opened."""
    cursor = repo / ".cursor"
    (cursor / "Dockerfile").write_text("FROM scratch\n")
    victim = cursor / "victim"
    victim.write_text("harmless")
    real_gettarinfo = tarfile.TarFile.gettarinfo

    def swap_after_stat(
        self: tarfile.TarFile, name: Any = None, arcname: Any = None, fileobj: Any = None
    ) -> Any:
        info = real_gettarinfo(self, name, arcname, fileobj)
        if name == str(victim):
            victim.unlink()
            victim.symlink_to(outside)
        return info

    monkeypatch.setattr(tarfile.TarFile, "gettarinfo", swap_after_stat)
    with pytest.raises(environment.EnvironmentFileError) as caught:
        environment.context_archive(_environment(repo, {"dockerfile": "Dockerfile"}))
    assert "victim" in caught.value.message and SECRET not in caught.value.message


@pytest.mark.parametrize(
    "name",
    ["file", "link", "chain", "dir-link/file", "dangling", "loop", "absent/deeper", "dir", ""],
)
def test_real_path_answers_as_os_path_realpath(tmp_path: Path, name: str) -> None:
    """The kernel's name of the file where it can be opened, os.path.realpath's answer
    where it cannot: the same string either way."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "file").write_text("x")
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to("dir/file")
    (tmp_path / "chain").symlink_to(tmp_path / "link")
    (tmp_path / "dir-link").symlink_to("dir")
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "loop").symlink_to("loop")
    path = tmp_path / name if name else tmp_path
    assert real_path(path) == os.path.realpath(path)
    assert real_path(str(path)) == os.path.realpath(path)


def test_real_path_of_a_relative_path_and_a_nul(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path)
    assert real_path("a/../a") == os.path.realpath("a/../a") == str(tmp_path / "a")
    assert real_path("") == os.path.realpath("")
    try:  # a NUL is no path: whatever os.path.realpath does with it, real_path does too
        expected = os.path.realpath("a\0b")
    except ValueError:
        with pytest.raises(ValueError):
            real_path("a\0b")
    else:
        assert real_path("a\0b") == expected
