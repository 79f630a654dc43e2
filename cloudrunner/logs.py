"""The worker's own operational log (not the audit log): structlog to stderr, the one
channel for what the daemon and the worker have to say (warnings included).

stdout carries the answer to the agent and nothing else, so every log line goes to stderr,
one line per event: human-readable (structlog's console renderer, no colours) when stderr is
a terminal, JSON otherwise (a service's journal or a log pipeline reads it). The level comes
from CLOUDRUNNER_LOG_LEVEL (default: warning). Modules take their logger from `get_logger`,
which works before `configure_logging` ran (the default configuration, warning and up).

A command's own words to its user (the CLI's one-line errors, `audit`'s warnings about the
file it reads) are its output, not this log.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

from cloudrunner.errors import CloudrunnerError

LEVEL_ENV = "CLOUDRUNNER_LOG_LEVEL"


class _StderrLogger:
    """Writes each line to whatever sys.stderr is *now* (it may be replaced, e.g. by a test
    harness, after logging was configured)."""

    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


class _StderrLoggerFactory:
    def __call__(self, *args: object) -> _StderrLogger:
        return _StderrLogger()


DEFAULT_LEVEL = "warning"
#: the level `configure_logging` set last (a logging level number)
_level = logging.WARNING


def _on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by something odd, or closed
        return False


def configure_logging(level_name: str | None = None, *, human: bool | None = None) -> None:
    """Configure the one channel; `human` (default: stderr is a terminal) picks the
    console renderer over JSON."""
    name = (level_name or os.environ.get(LEVEL_ENV) or DEFAULT_LEVEL).strip().lower()
    level = logging.getLevelNamesMapping().get(name.upper())
    if level is None:
        raise CloudrunnerError(
            f"{LEVEL_ENV}={name!r} is not a log level; use debug, info, warning or error"
        )
    global _level
    _level = level
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=False)
        if (_on_terminal() if human is None else human)
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_StderrLoggerFactory(),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> Any:
    """A logger of the one channel, named for its part (`cloudrunner.daemon`, ...). Before
    `configure_logging` runs (a library caller, a test), the default level applies and
    lines still go to stderr, never to stdout (structlog's own default)."""
    if not structlog.is_configured():
        configure_logging(DEFAULT_LEVEL)
    return structlog.get_logger(name)


def debugging() -> bool:
    """Whether debug lines are written: for a debug line on a hot path (one per daemon
    connection), whose logger would otherwise be bound afresh only to drop the line."""
    return _level <= logging.DEBUG
