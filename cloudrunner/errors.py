"""The one fatal-error type and its exit codes.

Every expected failure (bad input, a missing engine, a broken file) is raised as a
`CloudrunnerError` with a message that names what is wrong, where, and what to do.
The CLI's single error boundary turns it into one line on stderr and an exit code;
anything else that escapes is a bug and is reported as such.
"""

from __future__ import annotations


class ExitCode:
    OK = 0
    #: the command ran and found problems (validate with errors, audit verify broken)
    FINDINGS = 1
    #: the invocation, an input file, a payload or the environment is unusable
    USAGE = 2
    #: an unexpected internal error (a bug)
    INTERNAL = 70


class CloudrunnerError(Exception):
    """An expected failure with a message meant for the user."""

    exit_code: int = ExitCode.USAGE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message
