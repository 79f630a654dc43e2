"""The worker's Dockerfile: linted with hadolint, and its build context holds what it copies."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
from pathlib import Path

from tests.unit.deploy.manifests import ROOT

DOCKERFILE = ROOT / "Dockerfile"


def test_hadolint_finds_nothing() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "hadolint is missing: bash scripts/setup installs the dev tools"
    proc = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_both_stages_start_from_the_base_image_argument() -> None:
    text = DOCKERFILE.read_text()
    (default,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", text, re.M)
    assert default.startswith("python:3.11-slim")
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["${BASE_IMAGE}", "${BASE_IMAGE}"]


def _excluded(path: str, patterns: list[str]) -> bool:
    """.dockerignore semantics: the last matching pattern wins; `!` re-includes."""
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        core = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, core) or path.startswith(core + "/"):
            excluded = not negate
    return excluded


def test_the_build_context_keeps_what_the_dockerfile_copies() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = []
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources += line.split()[1:-1]
    assert "cloudrunner/" in sources and "pyproject.toml" in sources
    for source in sources:
        path = source.rstrip("/").replace("[e]", "e")
        assert not _excluded(path, patterns), f"{source} is excluded from the build context"
    for left_out in (".venv", ".git", "tests", "build/worker-context"):
        assert _excluded(left_out, patterns), left_out
