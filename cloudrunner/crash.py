"""The boundary for bugs: what the CLI and the hook client do with an exception that is not
an expected failure.

An expected failure is a `CloudrunnerError` (one line and its exit code, handled by the
callers). Anything else is a bug: its traceback goes to a file of its own in the temporary
directory (`cloudrunner-bug-*.log`, readable by the user only), stderr gets one line naming
that file, and the exit code is 70 (`ExitCode.INTERNAL`). A temporary file rather than the
state directory: the bug may be in reading the settings that name the state directory, and
the client runs as users who cannot write there.

Standard library only, imported only when a bug happened: the client's fast path must not
pay for it.
"""

from __future__ import annotations

import sys

#: `ExitCode.INTERNAL`, repeated so this module needs nothing from the package
INTERNAL = 70
BUG_FILE_PREFIX = "cloudrunner-bug-"


def report_bug(exc: BaseException) -> int:
    """Save `exc`'s traceback, say where in one stderr line, and return exit code 70. When
    the file cannot be written, the traceback goes to stderr instead (never lost)."""
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(exc))
    kind = type(exc).__name__
    try:
        fd, path = tempfile.mkstemp(prefix=BUG_FILE_PREFIX, suffix=".log")
        with open(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as err:
        sys.stderr.write(text)
        print(
            f"cloudrunner: internal error ({kind}), a bug: traceback above "
            f"(could not save it: {err.strerror or err}); please report it",
            file=sys.stderr,
        )
        return INTERNAL
    print(
        f"cloudrunner: internal error ({kind}), a bug: traceback written to {path}; "
        "please report it",
        file=sys.stderr,
    )
    return INTERNAL
