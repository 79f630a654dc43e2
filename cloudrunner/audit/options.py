"""How an audit log is written: the knobs the worker settings expose."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class FsyncPolicy(StrEnum):
    #: fdatasync after every record: a record is on disk before `append` returns
    ALWAYS = "always"
    #: fdatasync at an append when the last one is `fsync_interval` seconds old, and at close
    INTERVAL = "interval"
    #: leave it to the kernel: records survive a crash of the process, not of the machine
    NEVER = "never"


DEFAULT_FSYNC = FsyncPolicy.ALWAYS
DEFAULT_FSYNC_INTERVAL = 1.0
#: The live file is rotated before a record would take it past this size.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Characters of stdout/stderr kept per hook execution.
DEFAULT_EXCERPT_CAP = 2048


@dataclass(frozen=True)
class AuditConfig:
    path: Path
    #: who writes: put in every record, so several workers can share one log
    worker: str = ""
    fsync: FsyncPolicy = DEFAULT_FSYNC
    fsync_interval: float = DEFAULT_FSYNC_INTERVAL
    #: None: never rotate
    max_bytes: int | None = DEFAULT_MAX_BYTES
    #: keep payload text (prompts, file contents, tool outputs) instead of sha256 + length
    include_payload_text: bool = False
    excerpt_cap: int = DEFAULT_EXCERPT_CAP

    def __post_init__(self) -> None:
        if self.fsync_interval < 0:
            raise ValueError(
                f"audit fsync_interval must be >= 0 seconds, got {self.fsync_interval}"
            )
        if self.max_bytes is not None and self.max_bytes < 1:
            raise ValueError(f"audit max_bytes must be >= 1, got {self.max_bytes}")
        if self.excerpt_cap < 0:
            raise ValueError(f"audit excerpt_cap must be >= 0, got {self.excerpt_cap}")
