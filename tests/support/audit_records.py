"""Reading an audit log (JSON lines) back in tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_records(log: Path, *, missing_ok: bool = False) -> list[dict[str, Any]]:
    """Every record of the audit log at `log`, in order (none when `missing_ok` and there
    is no log yet)."""
    if missing_ok and not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]
