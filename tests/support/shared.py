"""The project's shared material beside the checkout (`../shared`), which the tests read
but never copy: the public hooks.json corpus is third-party data.

CI lays `shared/` next to its clone, so there a missing corpus is a failure; elsewhere the
tests that need it skip with where they looked.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.ci import missing

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """`$CLOUDRUNNER_SHARED_DIR`, else `shared/` beside the checkout."""
    override = os.environ.get("CLOUDRUNNER_SHARED_DIR")
    return Path(override) if override else REPO_ROOT.parent / "shared"


def corpus_dir() -> Path:
    """The corpus's hooks-json folder; fails in CI and skips elsewhere when it is absent."""
    corpus = shared_dir() / "corpus" / "hooks-json"
    if not corpus.is_dir():
        missing(
            f"no shared hooks.json corpus at {corpus}; lay the project's shared material "
            "beside the checkout or set CLOUDRUNNER_SHARED_DIR"
        )
    return corpus
