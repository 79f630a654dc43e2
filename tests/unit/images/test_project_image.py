"""`.cursor/environment.json`: parsing, path checks and the content-keyed build key."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cloudrunner.images import project_image as env
from cloudrunner.images.project_image import EnvironmentFileError


def write_repo(root: Path, config: object, files: dict[str, str] | None = None) -> Path:
    (root / ".cursor").mkdir(parents=True, exist_ok=True)
    text = config if isinstance(config, str) else json.dumps(config)
    (root / ".cursor" / "environment.json").write_text(text)
    for rel, content in (files or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return root


def loaded(root: Path) -> env.ProjectEnvironment:
    found = env.load_environment(root)
    assert found is not None
    return found


def test_no_environment_file(tmp_path: Path) -> None:
    assert env.load_environment(tmp_path) is None


def test_full_file_with_comments(tmp_path: Path) -> None:
    text = """{
      // the image hooks expect
      "build": {"dockerfile": "Dockerfile", "context": ".."},
      /* refresh dependencies */
      "install": "npm ci // not a comment inside a string",
      "start": "sleep infinity",
      "terminals": [{"name": "dev", "command": "npm run dev"}],
      "repositoryDependencies": ["github.com/org/lib"],
      "agentCanUpdateSnapshot": false
    }"""
    found = loaded(write_repo(tmp_path, text))
    assert found.install == "npm ci // not a comment inside a string"
    assert found.install_argv() == ["/bin/sh", "-c", found.install]
    assert found.config.build is not None
    assert (found.config.build.dockerfile, found.config.build.context) == ("Dockerfile", "..")
    assert found.config.repository_dependencies == ["github.com/org/lib"]
    assert found.config.agent_can_update_snapshot is False
    assert found.warnings == ()


def test_comment_stripping_keeps_positions() -> None:
    text = '{"a": 1, /* x\ny */ "b": "//no"} // tail'
    stripped = env.strip_json_comments(text)
    assert len(stripped) == len(text)
    assert stripped.count("\n") == 1
    assert json.loads(stripped) == {"a": 1, "b": "//no"}


def test_blank_install_means_none(tmp_path: Path) -> None:
    found = loaded(write_repo(tmp_path, {"install": "   "}))
    assert found.install is None
    assert found.install_argv() is None
    assert not found.has_build


def test_unknown_keys_and_snapshot_are_warnings(tmp_path: Path) -> None:
    found = loaded(
        write_repo(tmp_path, {"snapshot": "snap-123", "future": 1, "install": "make deps"})
    )
    assert any("'future'" in w for w in found.warnings)
    assert any("snap-123" in w and "cannot use" in w for w in found.warnings)
    assert found.install == "make deps"


def test_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    write_repo(tmp_path, '{\n  "install": "x",\n}\n')
    with pytest.raises(EnvironmentFileError, match=r"environment\.json:3:1: not valid JSON"):
        env.load_environment(tmp_path)


def test_wrong_type_names_the_pointer(tmp_path: Path) -> None:
    write_repo(tmp_path, {"build": {"dockerfile": 7}})
    with pytest.raises(EnvironmentFileError, match=r"/build/dockerfile: input should be a"):
        env.load_environment(tmp_path)


def test_top_level_must_be_an_object(tmp_path: Path) -> None:
    write_repo(tmp_path, "[]")
    with pytest.raises(EnvironmentFileError, match="must be a JSON object"):
        env.load_environment(tmp_path)


def test_paths_are_relative_to_the_cursor_folder(tmp_path: Path) -> None:
    root = write_repo(
        tmp_path,
        {"build": {"dockerfile": "Dockerfile", "context": ".."}},
        {".cursor/Dockerfile": "FROM scratch\n"},
    )
    inputs = env.resolve_build(loaded(root))
    assert inputs.context == root.resolve()
    assert inputs.dockerfile == (root / ".cursor" / "Dockerfile").resolve()
    assert inputs.dockerfile_in_context == ".cursor/Dockerfile"


def test_default_context_is_the_cursor_folder(tmp_path: Path) -> None:
    root = write_repo(
        tmp_path, {"build": {"dockerfile": "Dockerfile"}}, {".cursor/Dockerfile": "FROM x\n"}
    )
    assert env.resolve_build(loaded(root)).context == (root / ".cursor").resolve()


def test_context_outside_the_repository_is_refused(tmp_path: Path) -> None:
    root = write_repo(
        tmp_path / "repo",
        {"build": {"dockerfile": "Dockerfile", "context": "../.."}},
        {".cursor/Dockerfile": "FROM x\n"},
    )
    with pytest.raises(EnvironmentFileError, match=r"/build/context: .* is outside the repository"):
        env.resolve_build(loaded(root))


def test_symlink_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Dockerfile").write_text("FROM x\n")
    root = write_repo(tmp_path / "repo", {"build": {"dockerfile": "df/Dockerfile"}})
    os.symlink(outside, root / ".cursor" / "df")
    with pytest.raises(EnvironmentFileError, match=r"/build/dockerfile: .* is outside"):
        env.resolve_build(loaded(root))


def test_missing_dockerfile_is_named(tmp_path: Path) -> None:
    root = write_repo(tmp_path, {"build": {"dockerfile": "Nope"}})
    with pytest.raises(EnvironmentFileError, match=r"/build/dockerfile: .*Nope does not exist"):
        env.resolve_build(loaded(root))


def test_base_images_skip_stages_and_scratch() -> None:
    text = (
        "FROM --platform=linux/amd64 cloudrunner/base:bookworm AS build\n"
        "RUN make\n"
        "from build as second\n"
        "FROM scratch\n"
        "FROM debian:bookworm-slim\n"
        "COPY --from=build /out /out\n"
    )
    assert env.base_images(text) == ["cloudrunner/base:bookworm", "debian:bookworm-slim"]


def _key(root: Path, base: str | None = "sha256:aaa") -> str:
    inputs = env.resolve_build(loaded(root))
    return env.build_key(inputs, {"cloudrunner/base:bookworm": base})


@pytest.fixture
def buildable(tmp_path: Path) -> Path:
    return write_repo(
        tmp_path,
        {"build": {"dockerfile": "Dockerfile", "context": ".."}},
        {
            ".cursor/Dockerfile": "FROM cloudrunner/base:bookworm\nCOPY tools /tools\n",
            "tools/fmt.sh": "#!/bin/sh\necho fmt\n",
            "notes/ignored.txt": "v1",
            ".dockerignore": "notes\n",
        },
    )


def test_build_key_is_stable(buildable: Path) -> None:
    assert _key(buildable) == _key(buildable)


def test_build_key_follows_context_content_mode_and_base(buildable: Path) -> None:
    first = _key(buildable)
    (buildable / "tools" / "fmt.sh").write_text("#!/bin/sh\necho fmt v2\n")
    second = _key(buildable)
    assert second != first
    (buildable / "tools" / "fmt.sh").chmod(0o755)
    third = _key(buildable)
    assert third != second
    assert _key(buildable, base="sha256:bbb") != third


def test_build_key_ignores_dockerignored_files_and_mtimes(buildable: Path) -> None:
    first = _key(buildable)
    (buildable / "notes" / "ignored.txt").write_text("v2")
    os.utime(buildable / "tools" / "fmt.sh", (1, 1))
    assert _key(buildable) == first


def test_build_key_follows_the_dockerfile(buildable: Path) -> None:
    first = _key(buildable)
    (buildable / ".cursor" / "Dockerfile").write_text("FROM cloudrunner/base:bookworm\n")
    assert _key(buildable) != first


def test_image_tag_is_keyed() -> None:
    assert env.image_tag("ab" * 32) == "cloudrunner/environment:" + ("ab" * 12)


def test_the_loaded_environment_carries_the_digest_of_the_bytes_it_was_parsed_from(
    tmp_path: Path,
) -> None:
    """The worker keys its built images by this digest: the file is read once per event,
    inside the workspace, not again (and unchecked) to be hashed."""
    import hashlib

    from cloudrunner.images.project_image import ENVIRONMENT_FILE, load_environment

    raw = b'{"build": {"dockerfile": "Dockerfile"}}'
    (tmp_path / ENVIRONMENT_FILE).parent.mkdir(parents=True)
    (tmp_path / ENVIRONMENT_FILE).write_bytes(raw)
    env = load_environment(tmp_path)
    assert env is not None and env.sha256 == hashlib.sha256(raw).hexdigest()
