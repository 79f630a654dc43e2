"""Fixtures of the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cloudrunner.logs import DEFAULT_LEVEL, configure_logging


@pytest.fixture(autouse=True)
def _default_log_channel() -> Iterator[None]:
    """Each test starts on the log channel's default configuration (a test that sets the
    level to error must not silence the next test's warnings)."""
    configure_logging(DEFAULT_LEVEL)
    yield
