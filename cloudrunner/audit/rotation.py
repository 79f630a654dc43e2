"""Names of a rotated audit log: `audit.log` is live, `audit.log.1` the newest rotated file.

The chain runs from the highest-numbered file to the live one; the writer never deletes a
rotated file (removing old records is the operator's retention decision, and verify reports
the chain as starting mid-way once it happened).
"""

from __future__ import annotations

import re
from pathlib import Path


def rotated_path(path: Path, number: int) -> Path:
    return path.with_name(f"{path.name}.{number}")


def lock_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.lock")


def rotated_numbers(path: Path) -> list[int]:
    """The numbers N of the existing `path.N` files, ascending (newest first)."""
    pattern = re.compile(re.escape(path.name) + r"\.([1-9][0-9]*)")
    try:
        names = [entry.name for entry in path.parent.iterdir()]
    except OSError:
        return []
    numbers = [int(m.group(1)) for name in names if (m := pattern.fullmatch(name))]
    return sorted(numbers)
