"""Listing an image's PATH programs in a throwaway container, once per image id."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import docker
import pytest

from cloudrunner.cli import main
from cloudrunner.validate import image_programs
from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker


def test_programs_are_listed_once_per_image_id_and_nothing_is_left_behind(
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
    runtime_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLOUDRUNNER_WORKER_ID", docker_tracker.worker_id)
    cache = tmp_path / image_programs.CACHE_DIR_NAME
    first = image_programs.list_programs(docker_client, runtime_image, cache)
    assert not first.cached
    assert "/usr/local/bin" in first.path_dirs
    names = {p.rsplit("/", 1)[-1] for p in first.programs}
    assert {"sh", "bash", "python3", "jq", "git", "curl"} <= names
    assert "pwsh" not in names
    image_id = docker_client.images.get(runtime_image).id
    assert first.image_id == image_id
    assert (cache / f"{image_id.removeprefix('sha256:')}.json").is_file()
    again = image_programs.list_programs(docker_client, runtime_image, cache)
    assert again.cached and again.programs == first.programs
    assert docker_tracker.labelled_containers() == []


def test_an_image_that_is_not_there_is_a_clear_reason_to_skip(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    missing = f"cloudrunner/no-such-image:{uuid.uuid4().hex[:12]}"
    with pytest.raises(image_programs.ImageCheckUnavailable, match="is not on this Docker engine"):
        image_programs.list_programs(docker_client, missing, tmp_path)


def test_validate_checks_programs_against_the_configured_image(
    docker_tracker: DockerTracker,
    runtime_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CLOUDRUNNER_WORKER_ID", docker_tracker.worker_id)
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("CLOUDRUNNER_STATE_DIR", str(state))
    monkeypatch.setenv("CLOUDRUNNER_IMAGE", runtime_image)
    root = tmp_path / "repo"
    (root / ".cursor").mkdir(parents=True)
    hooks = {"preToolUse": [{"command": "pwsh -NoProfile -c 'exit 0'"}],
             "stop": [{"command": "python3 -c 'print(1)' | jq ."}]}  # fmt: skip
    (root / ".cursor" / "hooks.json").write_text(json.dumps({"version": 1, "hooks": hooks}))
    assert main(["validate", "--format", "json", str(root)]) == 0
    report = json.loads(capsys.readouterr().out)
    diagnostics = report["files"][0]["diagnostics"]
    assert [d["code"] for d in diagnostics] == ["program-not-in-image"]
    assert f"`pwsh` is not in image {runtime_image}" in diagnostics[0]["message"]
    assert report["notes"][0]["code"] == "image-checked"
    assert len(list((state / image_programs.CACHE_DIR_NAME).iterdir())) == 1
    assert docker_tracker.labelled_containers() == []
