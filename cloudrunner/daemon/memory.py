"""Giving memory back after a crowd of connections has gone.

Each open connection costs the daemon about 7 KiB (the protocol object, its parser, the
transport). When thousands close, CPython and glibc keep the freed memory for reuse, so the
resident size stays at its peak. `malloc_trim` hands the free pages of the C heap back to
the kernel; `Trimmer` calls it once the connection count has fallen well below its peak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable

#: a fall in open connections worth a trim
TRIM_AFTER_DROP = 1000


def _load_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to call
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _load_trim()


def trim() -> bool:
    """Collect garbage and return free C-heap pages to the kernel; False where the C
    library has no malloc_trim."""
    gc.collect()
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


class Trimmer:
    """Trims once the open-connection count has fallen `TRIM_AFTER_DROP` below its peak, and
    again on the next `FOLLOW_UPS` ticks (closed connections are freed a little after they
    stop being counted)."""

    FOLLOW_UPS = 3

    def __init__(self, count: Callable[[], tuple[int, int]]) -> None:
        """`count`: the open connections now, and the most open at once since the last
        call (so a crowd that came and went between two ticks is seen)."""
        self.count = count
        self.peak = 0
        self.trims = 0
        self._follow_ups = 0

    def tick(self) -> None:
        now, highest = self.count()
        self.peak = max(self.peak, highest)
        if now >= self.peak:
            self.peak = now
        elif self.peak - now >= TRIM_AFTER_DROP:
            self.peak = now
            self._follow_ups = self.FOLLOW_UPS + 1
        if self._follow_ups:
            self._follow_ups -= 1
            trim()
            self.trims += 1
