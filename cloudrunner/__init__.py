"""cloudrunner: a containerised executor for Cursor-style agent hooks in cloud agents.

Importing the package costs nothing beyond the interpreter: the per-event client
(`cloudrunner hook`) starts on every agent step, so `__version__` is looked up lazily, from
`cloudrunner/version.py` (the one source of the version; the commit is there too).
`lazy_export` is how the sub-packages whose modules are costly to import (audit, daemon,
event, egress) export their public names: each is imported on first use, so importing one
module of such a package does not import the rest.
"""

# No `from __future__ import annotations` here: the client's start-up would pay for it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["__version__", "lazy_export"]


def lazy_export(namespace: "dict[str, Any]", where: "dict[str, str]", name: str) -> "Any":
    """A package's `__getattr__` (PEP 562): `name` from the module `where` says holds it
    (`"pkg.module"`, or `"pkg.module:other"` for a name exported under another), imported
    now and kept in the package's `namespace` for the next lookup."""
    place = where.get(name)
    if place is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    import importlib

    module, _, attribute = place.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    namespace[name] = value
    return value


def __getattr__(name: str) -> "Any":
    if name == "__version__":
        from cloudrunner.version import VERSION

        return VERSION
    raise AttributeError(f"module 'cloudrunner' has no attribute {name!r}")
