"""cloudrunner: a containerised executor for Cursor-style agent hooks in cloud agents."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cloudrunner")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.1.0"

__all__ = ["__version__"]
