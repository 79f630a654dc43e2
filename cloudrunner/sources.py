"""Hook sources (spec section 2): find, read and load enterprise, team, project and user files.

A `Profile` decides what loads: `cloud` (enterprise, team, project; command hooks; the 14
cloud events) or `desktop` (all four sources and all 21 events; prompt hooks kept so each
event can report them as not executable). Everything left out is a diagnostic with a reason.
A broken file disables its own source only. Each loaded source carries its priority, the
working directory of its hooks and the sha256 of the bytes it loaded.

A long-lived worker loads every source on every event (a changed file takes effect on the
next event), so an unchanged file's load is remembered: by its `LoadGuard`, the identity of
the file (its and its symlink's inode, size and times), of its directory and of its
source's root. Any edit, replacement, new symlink or moved directory there changes that
identity and the file is read again (its content hashed, its parse reused when the bytes
are the same). A file changed in the last `RACY_NS` is always read: within one timer tick
two writes of the same size leave the same times, so its identity cannot tell them apart
yet. That is the module's one way of telling a changed file: `SourceSet.reload()` is a
fresh load with the same settings (so through the same memo), compared with the set it
reloads to name what changed.

Reading refuses a symlink that resolves outside the source's directory, anything that is
not a regular file, and files over 1 MiB: a repository is untrusted input, and its hooks
file must not become a way to read (or hang on) something else on the worker's host.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple, TypeVar

from cloudrunner.memo import BoundedMemo
from cloudrunner.protocol.claude_config import parse_claude_settings
from cloudrunner.protocol.claude_mapping import ClaudeOrigin
from cloudrunner.protocol.config import HookEntry, HooksFile, ParseResult, parse_hooks_file
from cloudrunner.protocol.diagnostics import Diagnostic, error, info
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.repo_files import RepoFileRefused, inside, read_inside, real_path

T = TypeVar("T")

#: the fleet's hooks, of cloudrunner's own: Cursor's enterprise file, /etc/cursor/hooks.json,
#: is on a cloud agent's VM the agent's file, whose hooks call the daemon
DEFAULT_ENTERPRISE_PATH = Path("/etc/cloudrunner/enterprise-hooks.json")
MAX_HOOKS_FILE_BYTES = 1024 * 1024
HOOKS_FILE_NAME = "hooks.json"


class SourceStatus(StrEnum):
    LOADED = "loaded"
    #: there is no file (or no source configured)
    ABSENT = "absent"
    #: not loaded by choice: the profile or the workspace trust excludes it
    SKIPPED = "skipped"
    #: the file exists but cannot be used (unreadable, refused, invalid)
    BROKEN = "broken"


@dataclass(frozen=True)
class SourceSettings:
    """Where the sources are and what loads. The worker builds this from its settings."""

    #: the repository root (None: no project source)
    workspace: Path | None = None
    profile: Profile = Profile.CLOUD
    #: None: the default DEFAULT_ENTERPRISE_PATH, whose absence is normal; a path given here
    #: is expected to exist, and its absence is an error diagnostic
    enterprise_path: Path | None = None
    #: the operator's managed hooks file, or a directory holding hooks.json
    team_path: Path | None = None
    #: the home whose ~/.cursor/hooks.json is the user source (None: the current user's)
    user_home: Path | None = None
    #: whether project hooks run (spec: the worker trusts the workspace it was given)
    trust_workspace: bool = True
    #: the source kinds the operator allows to load (managed-only mode: a subset)
    allowed: frozenset[SourceKind] = frozenset(SourceKind)
    #: approved digests of the project hooks (`cloudrunner hooks digest`); None: not pinned
    project_digests: frozenset[str] | None = None
    #: the operator's globs of more repository files the digest covers
    project_digest_paths: tuple[str, ...] = ()
    #: also load Claude Code's settings files (Cursor's "Third Party Hooks"; off by default)
    claude_code: bool = False


@dataclass(frozen=True)
class LoadedSource:
    kind: SourceKind
    #: the hooks file (as configured, not resolved); None when no source is configured
    path: Path | None
    #: where this source's hooks run
    working_dir: Path | None
    status: SourceStatus
    #: sha256 (hex) of the bytes loaded; None when nothing was read
    sha256: str | None
    #: the whole parsed file (None unless it parsed)
    config: HooksFile | None
    #: the hooks that run under the profile, per event in file order
    hooks: Mapping[str, tuple[HookEntry, ...]]
    diagnostics: tuple[Diagnostic, ...]
    #: a Claude Code settings file (kind project or user for trust, sandbox and policy)
    origin: ClaudeOrigin | None = None

    @property
    def priority(self) -> int:
        return self.rank

    @property
    def rank(self) -> int:
        """The place in the priority order: enterprise 0 ... user 3, then the Claude files."""
        return self.kind.priority if self.origin is None else self.origin.rank

    @property
    def name(self) -> str:
        """The source as records and messages name it (`project`, `claude-project`, ...)."""
        return str(self.origin or self.kind)

    @property
    def loaded(self) -> bool:
        return self.status is SourceStatus.LOADED


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
        if exc.code == "too-large":
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
                        "hook-skipped",
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


#: what the loaders of one `load_sources` call looked at, while it runs (see `_seen`)
_watching = threading.local()
Observation = tuple[Callable[..., object], tuple[object, ...], object]
#: SourceSettings -> (what its load looked at, and saw; the set it made)
_sets: BoundedMemo[SourceSettings, tuple[tuple[Observation, ...], SourceSet]] = BoundedMemo()


def _seen(look: Callable[..., T], *args: object) -> T:
    """`look(*args)`, a loader's one glance at the file system, noted for the set memo of
    `load_sources` when a load is being watched."""
    answer = look(*args)
    notes: list[Observation] | None = getattr(_watching, "notes", None)
    if notes is not None:
        notes.append((look, args, answer))
    return answer


def _home() -> Path:
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


def forget_loaded_sources() -> None:
    """Drop every remembered load (tests; a worker never needs to)."""
    _loaded.clear()
    _sets.clear()


@functools.lru_cache(maxsize=256)
def _parsed(data: bytes, file: str, claude: bool = False) -> ParseResult:
    """`parse_hooks_file`, once per file and content: a daemon reloads every source on every
    event (spec: a changed file takes effect on the next event), and the result is frozen.
    `claude`: the file is a Claude Code settings file."""
    if claude:
        return parse_claude_settings(data, file=file)
    return parse_hooks_file(data, file=file)


def _load_file(
    kind: SourceKind,
    path: Path,
    root: Path,
    working_dir: Path,
    profile: Profile,
    *,
    required: bool,
    origin: ClaudeOrigin | None = None,
) -> LoadedSource:
    file, top = str(path), str(root)
    key = (kind, file, top, str(working_dir), profile, required, origin)
    guard = _seen(_guard, file, top)
    if guard is not None:
        remembered = _loaded.get(key)
        if remembered is not None and remembered[0] == guard:
            return remembered[1]
    source = _read_file(kind, path, root, working_dir, profile, required=required, origin=origin)
    if origin is not None:
        source = replace(source, origin=origin)
    # Remembered only if the file still has the identity it had before it was read.
    if (
        guard is not None
        and source.status is SourceStatus.LOADED
        and guard.settled(time.time_ns())
        and _guard(file, top) == guard
    ):
        _loaded.put(key, (guard, source))
    return source


def _read_file(
    kind: SourceKind,
    path: Path,
    root: Path,
    working_dir: Path,
    profile: Profile,
    *,
    required: bool,
    origin: ClaudeOrigin | None = None,
) -> LoadedSource:
    file = str(path)
    # The hooks run in the real directory: the sandbox mounts it at its real path, so a
    # symlinked config directory would not exist there under its link name.
    working_dir = Path(real_path(working_dir))
    try:
        data = read_hooks_bytes(path, root)
    except FileNotFoundError:
        make = error if required else info
        what = "does not exist; fix the configured path" if required else "is absent"
        note = make("source-absent", f"{kind} hooks file {path} {what}", file=file)
        return LoadedSource(kind, path, working_dir, SourceStatus.ABSENT, None, None, {}, (note,))
    except HooksFileRefused as exc:
        note = error(exc.code, f"{exc.message}; the {kind} source is not loaded", file=file)
        return LoadedSource(kind, path, working_dir, SourceStatus.BROKEN, None, None, {}, (note,))
    digest = hashlib.sha256(data).hexdigest()
    parsed = _parsed(data, file, origin is not None)
    diagnostics = list(parsed.diagnostics)
    if parsed.config is None:
        diagnostics.append(
            error(
                "source-disabled",
                f"the {kind} source is not loaded because its file has errors; "
                "other sources still run",
                file=file,
            )
        )
        return LoadedSource(
            kind,
            path,
            working_dir,
            SourceStatus.BROKEN,
            digest,
            None,
            {},
            tuple(diagnostics),
        )
    hooks, notes = _filter(kind, file, parsed.config, profile)
    diagnostics.extend(notes)
    return LoadedSource(
        kind,
        path,
        working_dir,
        SourceStatus.LOADED,
        digest,
        parsed.config,
        hooks,
        tuple(diagnostics),
    )


def _not_loaded(
    kind: SourceKind, path: Path | None, status: SourceStatus, note: Diagnostic
) -> LoadedSource:
    return LoadedSource(kind, path, None, status, None, None, {}, (note,))


def _managed_refusal(kind: SourceKind, path: Path, settings: SourceSettings) -> LoadedSource | None:
    """An operator's (enterprise or team) hooks path that must not load: a relative one
    (it would depend on where the process started) or one inside the workspace (the
    repository would choose the operator's hooks), checked on every load because the
    workspace may come with the event."""
    problem = ""
    if not path.is_absolute():
        problem = "is a relative path; give an absolute one"
    elif settings.workspace is not None and inside(
        _seen(real_path, path), _seen(real_path, settings.workspace)
    ):
        problem = (
            f"lies inside the workspace {settings.workspace}, so the repository would decide "
            f"the {kind} hooks; keep them outside every checkout"
        )
    if not problem:
        return None
    note = error("managed-path-refused", f"the {kind} hooks path {path} {problem}; the {kind} "
                 "source is not loaded", file=str(path))  # fmt: skip
    return LoadedSource(kind, path, None, SourceStatus.BROKEN, None, None, {}, (note,))


def _enterprise(settings: SourceSettings) -> LoadedSource:
    # A missing enterprise file, default or configured, means "no enterprise hooks" (the
    # `--enterprise-hooks` contract): machines without a managed policy are normal.
    path = settings.enterprise_path or DEFAULT_ENTERPRISE_PATH
    refused = _managed_refusal(SourceKind.ENTERPRISE, path, settings)
    if refused is not None:
        return refused
    return _load_file(
        SourceKind.ENTERPRISE, path, path.parent, path.parent, settings.profile, required=False
    )


def _team(settings: SourceSettings) -> LoadedSource:
    given = settings.team_path
    if given is None:
        return _not_loaded(
            SourceKind.TEAM,
            None,
            SourceStatus.ABSENT,
            info(
                "source-absent",
                "no team hooks configured (the operator gives a managed hooks file or directory)",
            ),
        )
    refused = _managed_refusal(SourceKind.TEAM, given, settings)
    if refused is not None:
        return refused
    if _seen(os.path.isdir, given):
        return _load_file(
            SourceKind.TEAM, given / HOOKS_FILE_NAME, given, given, settings.profile, required=True
        )
    return _load_file(
        SourceKind.TEAM, given, given.parent, given.parent, settings.profile, required=True
    )


def _project(settings: SourceSettings) -> LoadedSource:
    workspace = settings.workspace
    if workspace is None:
        return _not_loaded(
            SourceKind.PROJECT,
            None,
            SourceStatus.ABSENT,
            info("source-absent", "no workspace given, so there are no project hooks"),
        )
    path = workspace / ".cursor" / HOOKS_FILE_NAME
    if not settings.trust_workspace:
        return _not_loaded(
            SourceKind.PROJECT,
            path,
            SourceStatus.SKIPPED,
            info(
                "untrusted-workspace",
                f"workspace {workspace} is not trusted, so its project hooks are not loaded",
                file=str(path),
            ),
        )
    loaded = _load_file(
        SourceKind.PROJECT, path, workspace, workspace, settings.profile, required=False
    )
    if settings.project_digests is None or loaded.status is not SourceStatus.LOADED:
        return loaded
    return _pinned(loaded, workspace, settings.project_digests, settings.project_digest_paths)


def _pinned(
    loaded: LoadedSource, workspace: Path, approved: frozenset[str], extra: tuple[str, ...]
) -> LoadedSource:
    """The project source if the digest of its hooks (the file and the scripts it names)
    is approved; otherwise not loaded, with the digest to approve."""
    from cloudrunner import pinning

    assert loaded.path is not None
    file = str(loaded.path)
    try:
        data = read_hooks_bytes(loaded.path, workspace)
        if hashlib.sha256(data).hexdigest() != loaded.sha256:
            raise pinning.DigestError(f"{file} changed while its digest was taken")
        relative = os.path.relpath(loaded.path, workspace)
        computed = pinning.compute(workspace, data, relative, extra_paths=extra)
        digest = computed.digest
    except (OSError, HooksFileRefused, pinning.DigestError) as exc:
        note = error(
            "project-digest-failed",
            f"the project hooks are pinned and their digest cannot be taken ({exc}); "
            "they are not loaded",
            file=file,
        )
        return replace(loaded, status=SourceStatus.SKIPPED, hooks={}, diagnostics=(note,))
    # The source's version is the digest from here on (it is what a conversation has seen
    # and what records name), so a changed script counts as a new version of the source.
    version = digest.removeprefix(pinning.DIGEST_PREFIX)
    if not computed.approvable:  # fails closed: what it may run is not all covered
        note = error(
            "project-digest-uncovered",
            "the project hooks are pinned and cannot be approved by their digest: "
            + "; ".join(hook.describe() for hook in computed.uncovered),
            file=file,
        )
        return replace(
            loaded, status=SourceStatus.SKIPPED, sha256=version, hooks={}, diagnostics=(note,)
        )
    if digest in approved:
        unseen = "; ".join(computed.unseen)
        note = info(
            "project-approved",
            f"project hooks digest {digest} is approved"
            + (f" (it cannot see: {unseen})" if unseen else ""),
            file=file,
        )
        return replace(loaded, sha256=version, diagnostics=(*loaded.diagnostics, note))
    note = error(
        "project-not-approved",
        f"the project hooks' digest {digest} is not in sources.project_digests, so they are "
        "not loaded; after reviewing the hooks file and its scripts, add that digest to "
        "approve them (`cloudrunner hooks digest DIR` prints it)",
        file=file,
    )
    return replace(
        loaded, status=SourceStatus.SKIPPED, sha256=version, hooks={}, diagnostics=(note,)
    )


def _user(settings: SourceSettings) -> LoadedSource:
    home = settings.user_home or _seen(_home)
    directory = home / ".cursor"
    path = directory / HOOKS_FILE_NAME
    if not settings.profile.loads_user_hooks:
        return _not_loaded(
            SourceKind.USER,
            path,
            SourceStatus.SKIPPED,
            info(
                "source-skipped",
                "user hooks are not loaded in the cloud profile "
                "(a cloud VM has no user home config)",
                file=str(path),
            ),
        )
    return _load_file(SourceKind.USER, path, directory, directory, settings.profile, required=False)


def _claude_skipped(
    kind: SourceKind, path: Path, origin: ClaudeOrigin, note: Diagnostic
) -> LoadedSource:
    return replace(_not_loaded(kind, path, SourceStatus.SKIPPED, note), origin=origin)


def _claude_project(settings: SourceSettings, origin: ClaudeOrigin) -> LoadedSource | None:
    """`.claude/settings.local.json` or `.claude/settings.json` of the workspace: project
    sources for trust, managed-only mode and pinning; None when there is nothing to say."""
    workspace = settings.workspace
    if workspace is None:
        return None
    path = workspace / origin.relative
    if not settings.claude_code:
        if not _seen(os.path.lexists, path):
            return None
        note = info(
            "claude-code-off",
            f"{path} holds Claude Code settings and is not loaded: sources.claude_code is off "
            "(turn it on to run its hooks, as Cursor's Third Party Hooks setting does)",
            file=str(path),
        )
        return _claude_skipped(SourceKind.PROJECT, path, origin, note)
    if SourceKind.PROJECT not in settings.allowed:
        return replace(_load(SourceKind.PROJECT, settings, origin=origin), path=path)
    if not settings.trust_workspace:
        note = info(
            "untrusted-workspace",
            f"workspace {workspace} is not trusted, so its Claude Code hooks are not loaded",
            file=str(path),
        )
        return _claude_skipped(SourceKind.PROJECT, path, origin, note)
    loaded = _load_file(
        SourceKind.PROJECT, path, workspace, workspace, settings.profile, required=False,
        origin=origin,
    )  # fmt: skip
    if settings.project_digests is None or loaded.status is not SourceStatus.LOADED:
        return loaded
    return _pinned(loaded, workspace, settings.project_digests, settings.project_digest_paths)


def _claude_user(settings: SourceSettings) -> LoadedSource | None:
    """`~/.claude/settings.json`: a user source (not loaded in the cloud profile)."""
    if not settings.claude_code:
        return None
    origin = ClaudeOrigin.USER
    home = settings.user_home or _seen(_home)
    directory = home / ".claude"
    path = home / origin.relative
    if not settings.profile.loads_user_hooks:
        note = info(
            "source-skipped",
            "Claude Code user hooks are not loaded in the cloud profile "
            "(a cloud VM has no user home config)",
            file=str(path),
        )
        return _claude_skipped(SourceKind.USER, path, origin, note)
    if SourceKind.USER not in settings.allowed:
        return replace(_load(SourceKind.USER, settings, origin=origin), path=path)
    working_dir = settings.workspace or directory
    return _load_file(
        SourceKind.USER, path, directory, working_dir, settings.profile, required=False,
        origin=origin,
    )  # fmt: skip


def _claude(settings: SourceSettings, origin: ClaudeOrigin) -> LoadedSource | None:
    if origin is ClaudeOrigin.USER:
        return _claude_user(settings)
    return _claude_project(settings, origin)


_LOADERS = {
    SourceKind.ENTERPRISE: _enterprise,
    SourceKind.TEAM: _team,
    SourceKind.PROJECT: _project,
    SourceKind.USER: _user,
}


@dataclass(frozen=True)
class SourceSet:
    settings: SourceSettings
    #: all four kinds, highest priority first
    sources: tuple[LoadedSource, ...]
    #: the kinds whose content (or status) changed in the reload that made this set
    changed: tuple[SourceKind, ...] = ()

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        return tuple(d for s in self.sources for d in s.diagnostics)

    @property
    def loaded(self) -> tuple[LoadedSource, ...]:
        return tuple(s for s in self.sources if s.loaded)

    def source(self, kind: SourceKind) -> LoadedSource:
        return next(s for s in self.sources if s.kind is kind)

    def reload(self) -> SourceSet:
        """The sources loaded again with the same settings, as the next event would load
        them (`load_sources`: a file whose identity did not change is not read again).
        `changed` names the kinds whose content or status differs from this set's (a file
        that appeared, vanished or was edited); a source that came back equal is this
        set's own object."""
        before = {(s.kind, s.origin): s for s in self.sources}
        kept: list[LoadedSource] = []
        changed: list[SourceKind] = []
        for new in load_sources(self.settings).sources:
            old = before.pop((new.kind, new.origin), None)
            kept.append(old if old == new else new)
            if old is None or (old.sha256, old.status) != (new.sha256, new.status):
                changed.append(new.kind)
        # a Claude Code file that is no longer there to say anything about
        changed.extend(old.kind for old in before.values())
        return SourceSet(self.settings, tuple(kept), tuple(dict.fromkeys(changed)))


def _load(
    kind: SourceKind, settings: SourceSettings, *, origin: ClaudeOrigin | None = None
) -> LoadedSource:
    if kind in settings.allowed and origin is None:
        return _LOADERS[kind](settings)
    allowed = ", ".join(str(k) for k in SourceKind if k in settings.allowed) or "none"
    what = f"Claude Code {kind}" if origin is not None else str(kind)
    loaded = _not_loaded(
        kind,
        None,
        SourceStatus.SKIPPED,
        info(
            "source-not-allowed",
            f"{what} hooks are not loaded: the operator allows only these sources "
            f"(sources.allowed): {allowed}",
        ),
    )
    return replace(loaded, origin=origin)


def load_sources(settings: SourceSettings) -> SourceSet:
    """Load all four sources under the settings' profile, and the Claude Code files below them
    when `claude_code` is on (or found while it is off, to say so). Never raises for bad
    files.

    A daemon loads the sources on every event and they almost never change, so the set is
    remembered with every glance its loaders took at the file system (each file's
    `LoadGuard`, the real paths of the operator's hooks and of the workspace, whether a
    file or directory is there, the home directory) and what each saw: when every glance
    sees the same again, the remembered set is the answer, without the loaders' work. A
    set is not remembered when a file of it is not settled (`RACY_NS`) or the project is
    pinned (its digest covers the scripts, which no glance watches)."""
    remembered = _sets.get(settings)
    if remembered is not None and all(look(*args) == seen for look, args, seen in remembered[0]):
        return remembered[1]
    notes: list[Observation] = []
    _watching.notes = notes
    try:
        loaded = _load_all(settings)
    finally:
        _watching.notes = None
    now = time.time_ns()
    if settings.project_digests is None and all(
        not isinstance(seen, LoadGuard) or seen.settled(now) for _, _, seen in notes
    ):
        _sets.put(settings, (tuple(notes), loaded))
    return loaded


def _load_all(settings: SourceSettings) -> SourceSet:
    cursor = tuple(_load(kind, settings) for kind in SourceKind)
    claude = tuple(c for o in ClaudeOrigin if (c := _claude(settings, o)) is not None)
    return SourceSet(settings, cursor + claude)
