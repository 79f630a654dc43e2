"""The worker's own operational log (not the audit log): structlog to stderr.

stdout carries the answer to the agent and nothing else, so every log line goes to stderr;
the level comes from CLOUDRUNNER_LOG_LEVEL (default: warning).
"""

from __future__ import annotations

import logging
import os
import sys

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


def configure_logging(level_name: str | None = None) -> None:
    name = (level_name or os.environ.get(LEVEL_ENV) or "warning").strip().lower()
    level = logging.getLevelNamesMapping().get(name.upper())
    if level is None:
        raise CloudrunnerError(
            f"{LEVEL_ENV}={name!r} is not a log level; use debug, info, warning or error"
        )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_StderrLoggerFactory(),
        cache_logger_on_first_use=False,
    )
