from __future__ import annotations

from pathlib import Path

import pytest

from cloudrunner import images


def test_mirror_is_read_from_deb822_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLOUDRUNNER_DEBIAN_MIRROR", raising=False)
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n"
    )
    assert images.apt_mirror(tmp_path) == "http://mirror.example/debian"


def test_mirror_is_read_from_one_line_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLOUDRUNNER_DEBIAN_MIRROR", raising=False)
    (tmp_path / "sources.list").write_text(
        "# comment\ndeb [arch=amd64] http://other.example/debian bookworm main\n"
    )
    assert images.apt_mirror(tmp_path) == "http://other.example/debian"


def test_mirror_override_and_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLOUDRUNNER_DEBIAN_MIRROR", raising=False)
    assert images.apt_mirror(tmp_path) == images.DEFAULT_MIRROR
    monkeypatch.setenv("CLOUDRUNNER_DEBIAN_MIRROR", "http://pinned.example/debian")
    assert images.apt_mirror(tmp_path) == "http://pinned.example/debian"


def test_runtime_key_changes_with_the_dockerfile_and_the_base() -> None:
    k = images.runtime_key(b"FROM x\n", "sha256:aaa")
    assert k != images.runtime_key(b"FROM x\nRUN true\n", "sha256:aaa")
    assert k != images.runtime_key(b"FROM x\n", "sha256:bbb")
    assert k == images.runtime_key(b"FROM x\n", "sha256:aaa")


def test_images_dir_holds_the_runtime_dockerfile() -> None:
    dockerfile = images.images_dir() / "hook-runtime" / "Dockerfile"
    assert "ARG BASE" in dockerfile.read_text()
