"""Pinned project hooks: the digest of a repository's hooks, and whether it is approved.

An operator who wants only reviewed project hooks to run lists their digests in
`sources.project_digests`; project hooks whose digest is not listed do not load. The digest
covers, each with its executable bit:

- the hooks file;
- every file inside the repository that a word of one of its command hooks names, as the
  shell reads the command (`shell_syntax`): a script run by path, a file given to an
  interpreter or named by a redirection, in any simple command of a list, pipeline,
  subshell or `&&`/`||` chain, relative to the repository, after `$CURSOR_PROJECT_DIR`, or
  as an absolute path inside the checkout;
- every file under the hook directories (`HOOK_DIRECTORIES`, `.cursor/hooks/`), so a
  script that sources or imports a sibling is covered too (a symbolic link there is covered
  by where it points, and never followed out of the repository);
- every file matching the operator's `sources.project_digest_paths` globs.

So changing a script (or its mode) invalidates an approval as surely as changing the hooks
file. What the digest cannot see is reported (`HooksDigest.unseen`): a command built at run
time, a variable other than the workspace ones, a line the parser cannot read.

The digest fails closed on those: a command whose targets cannot be known from its text (a
`cd`, a parameter expansion with a default, `$PWD`, `~`, a variable the worker does not set,
`eval`, a substitution, a pattern, a word the parser cannot read; `shell_syntax.Uncertain`)
is not approvable by its command line alone. Each such part has a reach, the repository
files it may make the command run (`**/scripts/x.sh` after a `cd`, `**` for anything); every
repository file in that reach must be covered by the digest some other way (the hook
directory, or the operator's `sources.project_digest_paths`), or the hooks are not
approvable at all (`HooksDigest.uncovered`, one entry per such hook, saying why). Because
the check runs whenever the digest is taken, a file added later in that reach makes the
hooks unapprovable again rather than running unseen.

`cloudrunner hooks digest [DIR]` prints the digest to approve; `--files` lists what it covers
and what it cannot see. The recipe's version is part of what is hashed: version 2 (this
one) gives other digests than version 1 (the hooks file and the files named by a
blank-split command), so approvals of version 1 must be taken again.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cloudrunner import shell as shell_syntax
from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.claude_config import parse_claude_settings
from cloudrunner.protocol.config import parse_hooks_file
from cloudrunner.workspace import RepoFileRefused, inside, open_inside

DIGEST_PREFIX = "sha256:"
DIGEST_VERSION = 2
#: the recipe's version, part of what is hashed: a change of what is covered gives new
#: digests instead of silently matching old approvals
_RECIPE = f"cloudrunner-project-hooks-digest-v{DIGEST_VERSION}\n".encode()
#: every file under these (relative to the repository) is covered
HOOK_DIRECTORIES = (".cursor/hooks",)
#: a script bigger than this is refused rather than hashed on every event
MAX_SCRIPT_BYTES = 16 * 1024 * 1024
#: a digest covering more files than this is refused (a glob that matches a whole tree)
MAX_COVERED_FILES = 10_000
_PROJECT_PREFIXES = tuple(
    form
    for name in sorted(shell_syntax.WORKSPACE_VARIABLES)
    for form in (f"${name}", f"${{{name}}}")
)


class DigestError(CloudrunnerError):
    pass


@dataclass(frozen=True)
class CoveredFile:
    #: the path relative to the repository root, as it is hashed
    path: str
    sha256: str
    executable: bool
    #: a symbolic link's target (covered by its text, never followed)
    link: str | None = None


@dataclass(frozen=True)
class UncoveredHook:
    """A command hook whose targets cannot be known from its text, with repository files
    it may run that the digest does not cover: the hooks are not approvable until a
    digest path covers them."""

    #: where the hook is in the hooks file (`/hooks/stop/0`)
    pointer: str
    command: str
    #: why its targets cannot be known (one line each)
    reasons: tuple[str, ...]
    #: some of the repository files it may run that nothing covers
    files: tuple[str, ...]
    #: how many such files there are in all
    count: int
    #: globs that would cover them (a suggestion for sources.project_digest_paths)
    suggested: tuple[str, ...]

    def describe(self) -> str:
        shown = ", ".join(self.files) + (", ..." if self.count > len(self.files) else "")
        return (
            f"the hook at {self.pointer} (`{_short(self.command)}`) cannot be approved by its "
            f"command line alone: {'; '.join(self.reasons)}; it may run {self.count} "
            f"repository file(s) the digest does not cover ({shown}): cover them with "
            f"sources.project_digest_paths (for example {', '.join(self.suggested)}), or run "
            "a script named plainly instead"
        )


def _short(text: str, limit: int = 60) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


@dataclass(frozen=True)
class HooksDigest:
    digest: str
    files: tuple[CoveredFile, ...]
    #: what the digest cannot see (a command built at run time, an unparsable line)
    unseen: tuple[str, ...] = ()
    #: hooks whose uncertain targets are not covered: while any is, the hooks are not
    #: approvable (whatever sources.project_digests says)
    uncovered: tuple[UncoveredHook, ...] = ()

    @property
    def approvable(self) -> bool:
        return not self.uncovered

    def render(self) -> str:
        lines = [self.digest, f"covers (digest version {DIGEST_VERSION}):"]
        for f in self.files:
            shown = f"{f.path} -> {f.link} (the link itself)" if f.link is not None else f.path
            lines.append(f"  {f.sha256[:16]}  {'x' if f.executable else '-'}  {shown}")
        if self.unseen:
            lines.append(
                "cannot see (review these by hand; each needs every file it may run covered):"
            )
            lines += [f"  {note}" for note in self.unseen]
        if self.uncovered:
            lines.append(
                "not approvable: these hooks need a covered path (sources.project_digest_paths):"
            )
            lines += [f"  {hook.describe()}" for hook in self.uncovered]
        return "\n".join(lines)


def named_files(command: str, root: Path) -> tuple[list[str], list[str]]:
    """(the repository files `command` names, as paths relative to `root`, resolved and
    inside it; what the digest cannot see in it, one line each)."""
    parsed = shell_syntax.parse(command)
    real_root = os.path.realpath(root)
    found: list[str] = []
    for word in parsed.words:
        for candidate in _candidates(word):
            path = _resolve(candidate, real_root)
            if path is not None:
                found.append(path)
    return found, list(parsed.unseen)


def _candidates(word: str) -> list[str]:
    """The paths a word may name: itself, and the value of an option (`--file=x`)."""
    for prefix in _PROJECT_PREFIXES:
        if word.startswith(prefix):
            word = "." + word[len(prefix) :]
            break
    out = [word]
    if (word.startswith("-") or _ASSIGNMENT.match(word)) and "=" in word:
        value = word.split("=", 1)[1]  # --file=x, and NAME=x (BASH_ENV=x.sh, PATH=a:b)
        out += [value, *value.split(":")]
    elif word.startswith("-"):
        out = []
    return [w for w in out if w and "://" not in w and "\0" not in w]


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _resolve(word: str, real_root: str) -> str | None:
    """`word` as a regular file inside the repository, relative to it, or None."""
    candidate = os.path.realpath(os.path.join(real_root, word))
    if candidate == real_root or not inside(candidate, real_root):
        return None
    try:
        if not stat.S_ISREG(os.stat(candidate).st_mode):
            return None
    except (OSError, ValueError):
        return None
    return os.path.relpath(candidate, real_root)


def _hash_file(root: Path, relative: str) -> CoveredFile:
    path = root / relative
    try:
        fd = open_inside(path, root)  # never opens a file outside the repository
    except FileNotFoundError:
        raise DigestError(f"{path} vanished while the hooks digest was taken") from None
    except RepoFileRefused as exc:
        raise DigestError(f"cannot cover {path} in the hooks digest: {exc.message}") from None
    except OSError as exc:
        raise DigestError(f"cannot read {path} for the hooks digest: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if st.st_size > MAX_SCRIPT_BYTES:
            raise DigestError(
                f"{path} is {st.st_size} bytes, over the {MAX_SCRIPT_BYTES}-byte limit of a "
                "file the hooks digest covers"
            )
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
    finally:
        os.close(fd)
    return CoveredFile(relative, h.hexdigest(), bool(st.st_mode & stat.S_IXUSR))


def _link(root: Path, relative: str) -> CoveredFile:
    """A symbolic link, covered by where it points (its text), never followed."""
    try:
        target = os.readlink(root / relative)
    except OSError as exc:
        raise DigestError(f"cannot read the link {root / relative}: {exc.strerror}") from None
    text = hashlib.sha256(b"symlink\0" + os.fsencode(target)).hexdigest()
    return CoveredFile(relative, text, False, link=target)


def _tree(root: Path, top: str, unseen: list[str]) -> Iterable[str]:
    """Every entry under the repository directory `top` (relative), no link followed; a
    symbolic link is listed itself. Nothing when `top` is absent; a `top` that is a link or
    leads out of the repository is reported, not walked."""
    real_root = os.path.realpath(root)
    start = os.path.normpath(os.path.join(real_root, top))
    if not os.path.lexists(start):
        return
    if os.path.islink(start) or not inside(os.path.realpath(start), real_root):
        unseen.append(f"{top} is a symbolic link (or leads out of the repository): not walked")
        return
    if not os.path.isdir(start):
        return
    for directory, dirs, files in os.walk(start, followlinks=False):
        dirs.sort()
        links = [d for d in dirs if os.path.islink(os.path.join(directory, d))]
        dirs[:] = [d for d in dirs if d not in links and d != ".git"]
        for name in sorted([*files, *links]):
            yield os.path.relpath(os.path.join(directory, name), real_root)


def _pattern(glob: str) -> re.Pattern[str]:
    """A repository glob as a regular expression: `*` and `?` stay within one directory,
    `**` crosses directories."""
    out = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def _literal_top(glob: str) -> str:
    """The directory a glob's matches all lie under (its leading parts without a pattern)."""
    parts = []
    for part in glob.split("/")[:-1]:
        if _has_magic(part):
            break
        parts.append(part)
    return "/".join(parts) or "."


def _has_magic(text: str) -> bool:
    return any(c in text for c in "*?[")


def check_glob(glob: str) -> str:
    """A `sources.project_digest_paths` entry: relative, inside the repository."""
    text = glob.strip()
    parts = text.split("/")
    if not text or text.startswith("/") or ".." in parts or "\0" in text:
        raise ValueError(
            f"{glob!r} is not a repository path: give a glob relative to the repository's "
            "root, without `..` (e.g. `tools/hooks/**`)"
        )
    return text


def _globbed(root: Path, globs: Sequence[str], unseen: list[str]) -> set[str]:
    """The repository files the operator's globs match (a glob without a pattern names a
    file, or a directory whose whole tree is covered)."""
    found: set[str] = set()
    for glob in globs:
        text = glob.removeprefix("./").rstrip("/")
        if not _has_magic(text):
            text += "/**" if os.path.isdir(root / text) else ""
        if not _has_magic(text):
            named = _resolve(text, os.path.realpath(root))
            if named is None:
                unseen.append(f"{glob} (sources.project_digest_paths) names no file inside "
                              "the repository")  # fmt: skip
            else:
                found.add(named)
            continue
        pattern = _pattern(text)
        found.update(name for name in _tree(root, _literal_top(text), unseen)
                     if pattern.match(name))  # fmt: skip
    return found


def compute(
    root: Path,
    hooks_bytes: bytes,
    hooks_file: str = ".cursor/hooks.json",
    *,
    extra_paths: Sequence[str] = (),
) -> HooksDigest:
    """The digest of a repository's project hooks, given the hooks file's bytes (the ones
    the loader read, so a file swapped in between cannot be approved by accident);
    `extra_paths`: the operator's globs of more files to cover."""
    # A Claude Code settings file (`.claude/settings*.json`) is read in Claude's form.
    parse = parse_claude_settings if hooks_file.startswith(".claude/") else parse_hooks_file
    parsed = parse(hooks_bytes, file=hooks_file)
    hooks: list[tuple[str, str]] = []  # (pointer, command)
    if parsed.config is not None:
        hooks = [
            (entry.pointer, entry.definition.command)
            for entries in parsed.config.hooks.values()
            for entry in entries
            if entry.definition.type == "command" and entry.definition.command
        ]
    unseen: list[str] = []
    named: set[str] = set()
    for _, command in hooks:
        files, notes = named_files(command, root)
        named.update(files)
        unseen += [note for note in notes if note not in unseen]
    entries: set[str] = set(named)
    for directory in HOOK_DIRECTORIES:
        entries.update(_tree(root, directory, unseen))
    entries.update(_globbed(root, extra_paths, unseen))
    entries.discard(hooks_file)
    if len(entries) > MAX_COVERED_FILES:
        raise DigestError(
            f"the hooks digest would cover {len(entries)} files, over {MAX_COVERED_FILES}: "
            "narrow sources.project_digest_paths"
        )
    covered = [CoveredFile(hooks_file, hashlib.sha256(hooks_bytes).hexdigest(), False)]
    for name in sorted(entries):
        covered.append(_entry(root, name, unseen))
    h = hashlib.sha256(_RECIPE)
    for f in covered:
        h.update(f"{f.path}\0{f.sha256}\0{int(f.executable)}\n".encode())
    uncovered = _uncovered(root, hooks, {f.path for f in covered})
    return HooksDigest(DIGEST_PREFIX + h.hexdigest(), tuple(covered), tuple(unseen), uncovered)


#: the repository entries the uncovered check lists at most; a bigger tree cannot be
#: checked, so an uncertain hook in it is not approvable
MAX_CHECKED_FILES = 100_000
#: uncovered files named per hook
_SHOWN_FILES = 3


def _uncovered(
    root: Path, hooks: Sequence[tuple[str, str]], covered: set[str]
) -> tuple[UncoveredHook, ...]:
    """The hooks with uncertain parts whose reach holds a repository file not covered."""
    listing: list[str] | None = None
    listed = False
    out: list[UncoveredHook] = []
    for pointer, command in hooks:
        uncertain = shell_syntax.parse(command).uncertain
        if not uncertain:
            continue
        if not listed:
            listing, listed = _listing(root), True
        reasons = tuple(dict.fromkeys(u.reason for u in uncertain))
        if listing is None:
            too_many = f"any of its files (over {MAX_CHECKED_FILES}, too many to check)"
            out.append(UncoveredHook(pointer, command, reasons, (too_many,), 1, ("**",)))
            continue
        reach = dict.fromkeys(r for u in uncertain for r in u.reach)
        pattern = re.compile("|".join(f"(?:{_pattern(r).pattern})" for r in reach))
        missing = [name for name in listing if pattern.match(name) and name not in covered]
        if missing:
            out.append(UncoveredHook(pointer, command, reasons, tuple(missing[:_SHOWN_FILES]),
                                     len(missing), _suggest(missing)))  # fmt: skip
    return tuple(out)


def _listing(root: Path) -> list[str] | None:
    """Every entry of the repository (files, and links listed, never followed; `.git` left
    out), relative; None when there are more than MAX_CHECKED_FILES."""
    real_root = os.path.realpath(root)
    cut = len(real_root) + 1
    names: list[str] = []
    for directory, dirs, files in os.walk(real_root, followlinks=False):
        prefix = directory[cut:] + "/" if len(directory) >= cut else ""
        keep = []
        for d in dirs:
            if d == ".git":
                continue
            if os.path.islink(os.path.join(directory, d)):
                names.append(prefix + d)
            else:
                keep.append(d)
        dirs[:] = keep
        names += [prefix + f for f in files]
        if len(names) > MAX_CHECKED_FILES:
            return None
    return names


def _suggest(missing: Sequence[str]) -> tuple[str, ...]:
    """Globs covering the files: their directories' trees (a file at the root by name)."""
    globs: list[str] = []
    for name in missing:
        directory = os.path.dirname(name)
        glob = f"{directory}/**" if directory else name
        if glob not in globs:
            globs.append(glob)
    return tuple(globs[:_SHOWN_FILES])


def _entry(root: Path, name: str, unseen: list[str]) -> CoveredFile:
    try:
        st = os.lstat(root / name)
    except OSError:
        raise DigestError(f"{root / name} vanished while the hooks digest was taken") from None
    if stat.S_ISLNK(st.st_mode):
        return _link(root, name)
    if not stat.S_ISREG(st.st_mode):
        unseen.append(f"{name} is not a regular file: covered by its kind only")
        return CoveredFile(name, hashlib.sha256(b"special\0%o" % st.st_mode).hexdigest(), False)
    return _hash_file(root, name)


def normalise(value: str) -> str:
    """An approved digest as written in the settings: `sha256:<64 hex>` (a bare hex is
    accepted); anything else is a settings error."""
    text = value.strip().lower()
    hexpart = text.removeprefix(DIGEST_PREFIX)
    if len(hexpart) != 64 or any(c not in "0123456789abcdef" for c in hexpart):
        raise ValueError(
            f"{value!r} is not a hooks digest; copy the line `cloudrunner hooks digest DIR` "
            "prints (sha256: and 64 hex digits)"
        )
    return DIGEST_PREFIX + hexpart
