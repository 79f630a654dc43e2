"""The worker image's build context, assembled from an installation
(cloudrunner/images/worker_build.py); the build itself runs in tests/e2e/test_worker_image.py
(from the checkout, through scripts/build-worker-image) and tests/e2e/test_wheel_install.py
(from an installed wheel)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cloudrunner.images import ImageBuildError
from cloudrunner.images import worker_build as worker_image

REPO = Path(__file__).resolve().parents[3]


def _client(tmp_path: Path) -> Path:
    client = tmp_path / "cloudrunner-hook"
    client.write_bytes(b"\x7fELF stand-in")
    client.chmod(0o755)
    return client


def test_the_context_holds_what_the_dockerfile_copies(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    worker_image.assemble(context, _client(tmp_path))
    dockerfile = (context / "Dockerfile").read_text()
    for line in re.findall(r"^COPY (?!--from)(.+)$", dockerfile, re.M):
        for source in line.split()[:-1]:
            if "[" in source:  # the optional wheelhouse (filled by fill_wheelhouse)
                continue
            assert (context / source).exists(), source
    assert (context / "cloudrunner" / "version.py").is_file()
    assert (context / "images" / "egress-proxy" / "check_grant.py").is_file()
    assert os.access(context / "build" / "cloudrunner-hook", os.X_OK)
    assert not list(context.rglob("__pycache__"))
    assert not (context / "cloudrunner" / "_images").exists()  # the recipes are in images/


def test_from_a_checkout_the_recipe_is_the_checkouts_root() -> None:
    assert worker_image.recipe_dir() == REPO


@pytest.mark.parametrize("kind", ["missing", "not executable", "a directory"])
def test_a_client_that_cannot_go_into_the_image_is_one_line(tmp_path: Path, kind: str) -> None:
    client = tmp_path / "cloudrunner-hook"
    if kind == "not executable":
        client.write_text("x")
    elif kind == "a directory":
        client.mkdir()
    with pytest.raises(ImageBuildError) as exc:
        worker_image.build_worker(client=client)
    assert exc.value.message == f"--client {client} is not an executable file"


def test_an_installation_without_the_compiled_client_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(worker_image.sys, "executable", str(tmp_path / "bin" / "python"))
    with pytest.raises(ImageBuildError) as exc:
        worker_image.build_worker()
    assert "there is no cloudrunner-hook beside" in exc.value.message
    assert "give --client PATH, or install the platform wheel" in exc.value.message
