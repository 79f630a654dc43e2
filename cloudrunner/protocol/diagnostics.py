"""Diagnostics: what is wrong (or worth knowing) about a hooks file, a source or a hook.

One shape for every finding, so `cloudrunner validate`, the worker's audit log and the tests
all read the same thing: a severity, a stable code, a message that says what to do, and a
location (file, JSON pointer, line and column) wherever one exists.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    #: the file, source or hook cannot be used as written
    ERROR = "error"
    #: used, but something in it is ignored or suspicious
    WARNING = "warning"
    #: a fact worth recording (a source that is absent, or skipped by the profile)
    INFO = "info"


@dataclass(frozen=True)
class Diagnostic:
    severity: Severity
    #: a stable, short identifier (for example `json-syntax`, `unknown-key`)
    code: str
    message: str
    file: str | None = None
    #: RFC 6901 JSON pointer into the file, "" for the whole document
    pointer: str | None = None
    line: int | None = None
    column: int | None = None

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def located(self, line: int | None, column: int | None) -> Diagnostic:
        return replace(self, line=line, column=column)

    def location(self) -> str:
        """`file:line:column`, with as much of it as is known."""
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def render(self) -> str:
        where = f" at {self.pointer}" if self.pointer else ""
        prefix = f"{self.location()}: " if self.file is not None else ""
        return f"{prefix}{self.severity}: {self.message}{where} [{self.code}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity": str(self.severity),
            "code": self.code,
            "message": self.message,
            "file": self.file,
            "pointer": self.pointer,
            "line": self.line,
            "column": self.column,
        }


# The codes are `diagnostic_codes.DiagnosticCode`s; a Diagnostic holds the plain string, so
# records and reports carry exactly what they did before the codes had one definition.


def error(code: str, message: str, **where: Any) -> Diagnostic:
    return Diagnostic(Severity.ERROR, str(code), message, **where)


def warning(code: str, message: str, **where: Any) -> Diagnostic:
    return Diagnostic(Severity.WARNING, str(code), message, **where)


def info(code: str, message: str, **where: Any) -> Diagnostic:
    return Diagnostic(Severity.INFO, str(code), message, **where)


def has_errors(diagnostics: tuple[Diagnostic, ...] | list[Diagnostic]) -> bool:
    return any(d.is_error for d in diagnostics)


def pointer_join(base: str, *tokens: str | int) -> str:
    """Append reference tokens to a JSON pointer, escaping `~` and `/` as RFC 6901 says."""
    out = base
    for token in tokens:
        text = str(token).replace("~", "~0").replace("/", "~1")
        out = f"{out}/{text}"
    return out
