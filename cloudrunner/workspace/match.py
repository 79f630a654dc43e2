"""One workspace, the agent's: does an event's `workspace_roots[0]` name the directory a
worker with a configured workspace (`--workspace DIR`, `--repo URL`) serves?

Hooks act on the tree the agent is editing. A worker configured with a workspace never runs
an event's hooks against another tree: an event whose first workspace root is a different
directory (compared after resolving links on both sides) is refused as
`workspace-mismatch`. A payload with no `workspace_roots` (absent, null or an empty list)
names no directory, so it is served from the configured workspace; the event's `received`
record says so (`workspace_roots_absent`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cloudrunner.refusals import ErrorCode
from cloudrunner.workspace.repo_files import real_path

MISMATCH = ErrorCode.WORKSPACE_MISMATCH
INVALID = ErrorCode.PAYLOAD_INVALID


@dataclass(frozen=True)
class RootCheck:
    """The outcome: `code` None when the event may run on the configured workspace,
    else the refusal code with its one-line `reason`."""

    code: ErrorCode | None = None
    reason: str = ""
    absent: bool = False


def check_roots(configured: Path, roots: object) -> RootCheck:
    """Compare the payload's `workspace_roots` with the worker's configured workspace."""
    if roots is None or roots == []:
        return RootCheck(absent=True)
    if not isinstance(roots, list) or not isinstance(roots[0], str) or not roots[0]:
        return RootCheck(
            INVALID,
            "the payload's workspace_roots is not a list of directory paths "
            f"(its first entry is {_shown(roots)}); the agent must send its workspace's path",
        )
    named = roots[0]
    if "\x00" in named or not os.path.isabs(named):
        return RootCheck(
            INVALID,
            f"the payload's workspace_roots[0] {named!r} is not an absolute path; the agent "
            "must send its workspace's absolute path",
        )
    theirs, ours = real_path(named), real_path(configured)
    if theirs == ours:
        return RootCheck()
    also = f" (which leads to {theirs})" if theirs != os.path.normpath(named) else ""
    return RootCheck(
        MISMATCH,
        f"the event names the workspace {named!r}{also}, but this worker serves {ours}; "
        "hooks only run on the workspace the agent edits: point the agent at "
        f"{ours}, or give the worker --workspace {theirs}",
    )


def _shown(roots: object) -> str:
    first = roots[0] if isinstance(roots, list) and roots else roots
    return repr(first)[:80]
