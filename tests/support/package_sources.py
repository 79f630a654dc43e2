"""The package's own source files, for the tests that scan them (each vocabulary spelled in
one module, every logger from `logs.get_logger`, source kinds passed as the enum, ...)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cloudrunner

PACKAGE = Path(cloudrunner.__file__).parent


def package_sources(*skip: Path) -> Iterator[tuple[str, str]]:
    """Each module of the package but those in `skip`, in path order: its path relative to
    the package (`event/pipeline.py`) and its text."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if path not in skip:
            yield str(path.relative_to(PACKAGE)), path.read_text()
