"""Hook sources (spec section 2): find, read and load enterprise, team, project and user
files, and Claude Code's settings files.

loaded (what a load is asked, `SourceSettings`, and gives, `LoadedSource`), files (a hooks
file read, parsed, filtered and remembered by its identity), loader (the `SourceLoader`
interface each kind fills, and what loaders share), one module per kind (enterprise, team,
project, user, claude_code), kinds (the registry: every kind's loader, in priority order),
loading (`load_sources` and the `SourceSet` it gives, remembered by every glance its loaders
took),
pinning (the digest of a repository's hooks that an operator approves). Nothing here
imports the settings: `settings.source_settings` makes a `SourceSettings` of them.
"""

from cloudrunner.sources.files import (
    RACY_NS,
    DirIdentity,
    FileIdentity,
    HooksFileRefused,
    LoadGuard,
    read_hooks_bytes,
    skip_reason,
)
from cloudrunner.sources.kinds import LOADERS
from cloudrunner.sources.loaded import (
    DEFAULT_ENTERPRISE_PATH,
    HOOKS_FILE_NAME,
    MAX_HOOKS_FILE_BYTES,
    LoadedSource,
    SourceSettings,
    SourceStatus,
)
from cloudrunner.sources.loader import SourceLoader
from cloudrunner.sources.loading import SourceSet, forget_loaded_sources, load_sources
from cloudrunner.sources.pinning import (
    DIGEST_PREFIX,
    DIGEST_VERSION,
    DigestError,
    HooksDigest,
    check_glob,
    compute,
    normalise,
)

__all__ = [
    "DEFAULT_ENTERPRISE_PATH",
    "DIGEST_PREFIX",
    "DIGEST_VERSION",
    "HOOKS_FILE_NAME",
    "LOADERS",
    "MAX_HOOKS_FILE_BYTES",
    "RACY_NS",
    "DigestError",
    "DirIdentity",
    "FileIdentity",
    "HooksDigest",
    "HooksFileRefused",
    "LoadGuard",
    "LoadedSource",
    "SourceLoader",
    "SourceSet",
    "SourceSettings",
    "SourceStatus",
    "check_glob",
    "compute",
    "forget_loaded_sources",
    "load_sources",
    "normalise",
    "read_hooks_bytes",
    "skip_reason",
]
