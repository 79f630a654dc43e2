from __future__ import annotations

from pathlib import Path

import pytest

from cloudrunner.images import build as images


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


def test_recipes_name_each_image_and_its_folder() -> None:
    found = {recipe.name: recipe for recipe in images.recipes()}
    assert list(found) == ["base", "hook-runtime", "egress-proxy", "worker"]
    assert (found["worker"].path / "Dockerfile").is_file()
    for name in images.RECIPES:
        assert (found[name].path / "Dockerfile").is_file()
        assert found[name].images[-1] == f"cloudrunner/{name}:latest"


def test_a_wheels_recipes_come_before_a_folder_above_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed, the package's parent is site-packages: an images/ folder there is not
    ours, the recipes shipped in cloudrunner/_images/ are."""
    package = tmp_path / "site-packages" / "cloudrunner"
    for where in (package / "_images", tmp_path / "site-packages" / "images"):
        (where / "hook-runtime").mkdir(parents=True)
        (where / "hook-runtime" / "Dockerfile").write_text("FROM x\n")
    monkeypatch.delenv("CLOUDRUNNER_IMAGES_DIR", raising=False)
    monkeypatch.setattr(images, "__file__", str(package / "images" / "build.py"))
    assert images.images_dir() == package / "_images"


@pytest.mark.parametrize("value", ["/nonexistent", "relative/dir", "/etc"])
def test_a_recipes_folder_named_in_the_environment_must_hold_the_recipes(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLOUDRUNNER_IMAGES_DIR", value)
    with pytest.raises(images.ImageBuildError) as exc:
        images.images_dir()
    assert f"CLOUDRUNNER_IMAGES_DIR={value} holds no hook-runtime/Dockerfile" in exc.value.message
    assert "\n" not in exc.value.message


def test_images_are_labelled_with_the_version_that_built_them() -> None:
    from cloudrunner.version import VERSION, commit

    assert images.version_labels() == {
        "org.opencontainers.image.version": VERSION,
        "org.opencontainers.image.revision": commit(),
    }
