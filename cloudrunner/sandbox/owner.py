"""Who hooks run as by default: the checkout's owner, never root.

On the agent's VM a hook is a process of the agent's user, who owns the workspace: its
`chmod +x`, the owner of the files it makes and its `git` behave as that user's. So a
hook runs as the owner of the workspace directory; when root owns that directory but not
the checkout in it (the agent's user cloned into a directory root made), as the owner of
the checkout's `.git`. Hooks never run as uid or gid 0: where root owns both, they run as
`FALLBACK_HOOK_UID` and get root's access through ACLs (see `ownership`); a mode change of
one of root's files then fails as it would for any user but root, and the record says why.

A hook cannot make `.git` another user's (giving a file away needs a privilege hooks do not
have), so this can only ever pick a uid that already owns the checkout.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cloudrunner.sandbox.limits import FALLBACK_HOOK_UID


def checkout_owner(workspace: Path) -> tuple[int, int]:
    """(uid, gid) hooks run as in `workspace` without a profile `user`/`group`; raises
    OSError when the workspace cannot be read."""
    st = os.stat(workspace)
    uid, gid = st.st_uid, st.st_gid
    if uid == 0:
        try:
            git = os.lstat(workspace / ".git")
        except OSError:
            git = None
        # a directory, or a file (a worktree's or a submodule's pointer); never a link
        if git is not None and git.st_uid != 0 and not stat.S_ISLNK(git.st_mode):
            uid, gid = git.st_uid, git.st_gid
    return uid or FALLBACK_HOOK_UID, gid or FALLBACK_HOOK_UID
