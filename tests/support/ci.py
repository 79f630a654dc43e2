"""What a test does when something it needs is missing: fail in CI, skip elsewhere."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(message: str) -> NoReturn:
    """CI provides the Docker engine, runsc and the images, so there a missing one is a
    failure; on a developer's machine it is a skip with what to run."""
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)
