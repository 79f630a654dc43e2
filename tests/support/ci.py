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


def needs_root(reason: str) -> pytest.MarkDecorator:
    """Skip a test that must run as root (to own a workspace as another uid, to drop to the
    hook uid, to mount) where the suite does not run as root. CI runs it as root, so there
    it always runs: `pytest_sessionstart` in tests/conftest.py stops a CI run that is not
    root instead of letting these tests skip."""
    return pytest.mark.skipif(os.geteuid() != 0 and not in_ci(), reason=reason)


def check_ci_user() -> None:
    """Under CI=true the suite runs as root (the CI contract): otherwise the tests marked
    `needs_root` would test nothing, so the run stops with one line."""
    if in_ci() and os.geteuid() != 0:
        raise pytest.UsageError(
            "CI=true: the test suite must run as root (tests of ownership, hook uids and "
            "mounts need it); run it as root, or unset CI to skip those tests"
        )
