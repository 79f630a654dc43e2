"""A hooks file of a source: read (inside its source's directory, at most 1 MiB), parsed,
filtered by the profile and remembered by its identity.

A long-lived worker loads every source on every event (a changed file takes effect on the
next event), so an unchanged file's load is remembered: by its `LoadGuard`, the identity of
the file (its and its symlink's inode, size and times), of its directory and of its
source's root. Any edit, replacement, new symlink or moved directory there changes that
identity and the file is read again (its content hashed, its parse reused when the bytes
are the same). A file changed in the last `RACY_NS` is always read: within one timer tick
two writes of the same size leave the same times, so its identity cannot tell them apart
yet. That is the package's one way of telling a changed file: `SourceSet.reload()` is a
fresh load with the same settings (so through the same memo), compared with the set it
reloads to name what changed.

Reading refuses a symlink that resolves outside the source's directory, anything that is
not a regular file, and files over 1 MiB: a repository is untrusted input, and its hooks
file must not become a way to read (or hang on) something else on the worker's host.

Every glance a loader takes at the file system goes through `seen`, so that the set memo
of `load_sources` (`loading`) knows what to look at again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple, TypeVar

from cloudrunner.memo import BoundedMemo
from cloudrunner.protocol.claude_config import parse_claude_settings
from cloudrunner.protocol.claude_mapping import ClaudeOrigin
from cloudrunner.protocol.config import HookEntry, HooksFile, ParseResult, parse_hooks_file
from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import Diagnostic, error, info
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.sources.loaded import MAX_HOOKS_FILE_BYTES, LoadedSource, SourceStatus
from cloudrunner.workspace import RepoFileRefused, read_inside, real_path

T = TypeVar("T")


class HooksFileRefused(Exception):
    """Internal: a hooks file that exists but must not or cannot be read (becomes a diagnostic)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FileIdentity(NamedTuple):
    """A hooks file's identity: its own lstat (it may be a symlink) and the stat of what it
    names. Equal identities mean an unchanged file (see the module docstring for when
    they cannot tell, `RACY_NS`)."""

    link_ino: int
    link_mtime_ns: int
    link_ctime_ns: int
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, link: os.stat_result, target: os.stat_result) -> FileIdentity:
        return cls(
            link.st_ino,
            link.st_mtime_ns,
            link.st_ctime_ns,
            target.st_dev,
            target.st_ino,
            target.st_size,
            target.st_mtime_ns,
            target.st_ctime_ns,
        )

    def newest_ns(self) -> int:
        return max(self.link_mtime_ns, self.link_ctime_ns, self.mtime_ns, self.ctime_ns)


class DirIdentity(NamedTuple):
    """A directory's identity (its lstat): it changes when an entry is added, removed or
    renamed in it, or when it is itself replaced."""

    dev: int
    ino: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, stat: os.stat_result) -> DirIdentity:
        return cls(stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns)


class LoadGuard(NamedTuple):
    """What a remembered load is checked against: the hooks file, its directory and its
    source's root. The one change-detection key of this module (reloads go through it too)."""

    file: FileIdentity
    directory: DirIdentity
    root: DirIdentity

    def settled(self, now_ns: int) -> bool:
        """Whether every time in it is older than `RACY_NS`."""
        newest = max(
            self.file.newest_ns(),
            self.directory.mtime_ns,
            self.directory.ctime_ns,
            self.root.mtime_ns,
            self.root.ctime_ns,
        )
        return now_ns - newest > RACY_NS


def read_hooks_bytes(path: Path, root: Path) -> bytes:
    """Read a hooks file that must resolve inside `root` (see `repo_files.read_inside`).

    Raises FileNotFoundError when there is no file, `HooksFileRefused` when it must not or
    cannot be read.
    """
    try:
        return read_inside(path, root, max_bytes=MAX_HOOKS_FILE_BYTES, limit="1 MiB")
    except RepoFileRefused as exc:
        message = exc.message
        if exc.code == DiagnosticCode.TOO_LARGE:
            message += " for hooks files"
        raise HooksFileRefused(exc.code, message) from None


def skip_reason(kind: SourceKind, entry: HookEntry, profile: Profile) -> str | None:
    """Why a hook of a source does not run under a profile (None: it runs, as far as loading
    is concerned; an invalid matcher is decided per event by the plan)."""
    spec = EVENTS[entry.event]
    if not profile.runs_event(spec.in_cloud):
        return f"{entry.event} is not available in cloud agents: {spec.not_in_cloud_reason}"
    if entry.definition.type == "prompt":
        if profile is Profile.CLOUD:
            return (
                "prompt hooks never run in cloud agents (they need the agent's LLM authentication)"
            )
        return "prompt hooks are not executable by cloudrunner (it has no LLM to ask)"
    if kind is SourceKind.USER and profile is Profile.CLOUD:
        return "user hooks are not loaded in cloud agents"
    return None


def _filter(
    kind: SourceKind, file: str, config: HooksFile, profile: Profile
) -> tuple[dict[str, tuple[HookEntry, ...]], list[Diagnostic]]:
    hooks: dict[str, tuple[HookEntry, ...]] = {}
    notes: list[Diagnostic] = []
    for event, entries in config.hooks.items():
        kept = []
        for entry in entries:
            reason = skip_reason(kind, entry, profile)
            # Desktop keeps prompt hooks so each event reports them as skipped when planned.
            if reason is None or (
                entry.definition.type == "prompt"
                and profile.loads_prompt_hooks
                and EVENTS[event].in_cloud | (profile is Profile.DESKTOP)
            ):
                kept.append(entry)
            else:
                notes.append(
                    info(
                        DiagnosticCode.HOOK_SKIPPED,
                        f"hook not loaded: {reason}",
                        file=file,
                        pointer=entry.pointer,
                    )
                )
        if kept:
            hooks[event] = tuple(kept)
    return hooks, notes


#: a file changed this recently (ns) is re-read on every load (see the module docstring)
RACY_NS = 2_000_000_000
#: (kind, path, root, working_dir, profile, required) -> (guard, the source as loaded)
_loaded: BoundedMemo[tuple[object, ...], tuple[LoadGuard, LoadedSource]] = BoundedMemo()


#: what the loaders of one `load_sources` call looked at, while it runs (see `seen`)
_watching = threading.local()
Observation = tuple[Callable[..., object], tuple[object, ...], object]


def seen(look: Callable[..., T], *args: object) -> T:
    """`look(*args)`, a loader's one glance at the file system, noted for the set memo of
    `load_sources` when a load is being watched."""
    answer = look(*args)
    notes: list[Observation] | None = getattr(_watching, "notes", None)
    if notes is not None:
        notes.append((look, args, answer))
    return answer


@contextlib.contextmanager
def watched() -> Iterator[list[Observation]]:
    """The glances (`seen`) of the loads inside the block, noted while it runs."""
    notes: list[Observation] = []
    _watching.notes = notes
    try:
        yield notes
    finally:
        _watching.notes = None


def home() -> Path:
    return Path.home()


def _guard(path: str, root: str) -> LoadGuard | None:
    """The identity of a hooks file, its directory and its source's root, or None when
    one of them cannot be stat'ed (then nothing is remembered). Plain strings, not
    pathlib: this runs for every source on every event."""
    directory = os.path.dirname(path)
    try:
        link = os.lstat(path)
        target = os.stat(path)
        parent = os.lstat(directory)
        top = parent if root == directory else os.lstat(root)
    except OSError:
        return None
    return LoadGuard(FileIdentity.of(link, target), DirIdentity.of(parent), DirIdentity.of(top))


def forget_loaded_files() -> None:
    """Drop every remembered file load (tests; a worker never needs to)."""
    _loaded.clear()


@functools.lru_cache(maxsize=256)
def _parsed(data: bytes, file: str, claude: bool = False) -> ParseResult:
    """`parse_hooks_file`, once per file and content: a daemon reloads every source on every
    event (spec: a changed file takes effect on the next event), and the result is frozen.
    `claude`: the file is a Claude Code settings file."""
    if claude:
        return parse_claude_settings(data, file=file)
    return parse_hooks_file(data, file=file)


class _FileLoad(NamedTuple):
    """A hooks file as a source asks for it (the arguments of `load_file`)."""

    kind: SourceKind
    path: Path
    root: Path
    working_dir: Path
    profile: Profile
    required: bool
    origin: ClaudeOrigin | None


def load_file(
    kind: SourceKind,
    path: Path,
    root: Path,
    working_dir: Path,
    profile: Profile,
    *,
    required: bool,
    origin: ClaudeOrigin | None = None,
) -> LoadedSource:
    """The source of the hooks file `path` (inside `root`; its hooks run in `working_dir`),
    read, parsed and filtered for `profile`, or remembered from an earlier load of the same
    file with the same `LoadGuard`. `required`: an absent file is an error, not a note;
    `origin`: the file is one of Claude Code's settings files."""
    file, top = str(path), str(root)
    key = (kind, file, top, str(working_dir), profile, required, origin)
    guard = seen(_guard, file, top)
    if guard is not None:
        remembered = _loaded.get(key)
        if remembered is not None and remembered[0] == guard:
            return remembered[1]
    source = _read_file(_FileLoad(kind, path, root, working_dir, profile, required, origin))
    # Remembered only if the file still has the identity it had before it was read.
    if (
        guard is not None
        and source.status is SourceStatus.LOADED
        and guard.settled(time.time_ns())
        and _guard(file, top) == guard
    ):
        _loaded.put(key, (guard, source))
    return source


def _read_file(load: _FileLoad) -> LoadedSource:
    """`load_file` without its memo: the file read, parsed and filtered."""
    kind, path, file = load.kind, load.path, str(load.path)
    # The hooks run in the real directory: the sandbox mounts it at its real path, so a
    # symlinked config directory would not exist there under its link name.
    working_dir = Path(real_path(load.working_dir))

    def source(
        status: SourceStatus,
        diagnostics: Iterable[Diagnostic],
        digest: str | None = None,
        config: HooksFile | None = None,
        hooks: Mapping[str, tuple[HookEntry, ...]] | None = None,
    ) -> LoadedSource:
        return LoadedSource(
            kind, path, working_dir, status, digest, config, {} if hooks is None else hooks,
            tuple(diagnostics), load.origin,
        )  # fmt: skip

    try:
        data = read_hooks_bytes(path, load.root)
    except FileNotFoundError:
        make = error if load.required else info
        what = "does not exist; fix the configured path" if load.required else "is absent"
        note = make("source-absent", f"{kind} hooks file {path} {what}", file=file)
        return source(SourceStatus.ABSENT, (note,))
    except HooksFileRefused as exc:
        note = error(exc.code, f"{exc.message}; the {kind} source is not loaded", file=file)
        return source(SourceStatus.BROKEN, (note,))
    digest = hashlib.sha256(data).hexdigest()
    parsed = _parsed(data, file, load.origin is not None)
    diagnostics = list(parsed.diagnostics)
    if parsed.config is None:
        diagnostics.append(
            error(
                DiagnosticCode.SOURCE_DISABLED,
                f"the {kind} source is not loaded because its file has errors; "
                "other sources still run",
                file=file,
            )
        )
        return source(SourceStatus.BROKEN, diagnostics, digest)
    hooks, notes = _filter(kind, file, parsed.config, load.profile)
    return source(SourceStatus.LOADED, [*diagnostics, *notes], digest, parsed.config, hooks)
