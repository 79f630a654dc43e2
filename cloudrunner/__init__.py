"""cloudrunner: a containerised executor for Cursor-style agent hooks in cloud agents.

Importing the package costs nothing beyond the interpreter: the per-event client
(`cloudrunner hook`) starts on every agent step, so `__version__` is looked up lazily, from
`cloudrunner/version.py` (the one source of the version; the commit is there too).
"""

# No `from __future__ import annotations` here: the client's start-up would pay for it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["__version__"]


def __getattr__(name: str) -> "Any":
    if name == "__version__":
        from cloudrunner.version import VERSION

        return VERSION
    raise AttributeError(f"module 'cloudrunner' has no attribute {name!r}")
