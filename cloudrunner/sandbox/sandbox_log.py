"""Diagnostic log events of the sandbox, which can never fail a hook run.

A logger bound to a stream that has gone away (a closed pipe, a test's captured output)
must not turn a hook's result into an exception, so every event goes through `note`.
"""

from __future__ import annotations

import contextlib
from typing import Any

from cloudrunner.logs import get_logger

_log = get_logger("cloudrunner.sandbox")


def note(level: str, event: str, **fields: Any) -> None:
    with contextlib.suppress(Exception):
        getattr(_log, level)(event, **fields)
