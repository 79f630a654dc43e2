"""Pinned project hooks: the digest of a repository's hooks, and whether it is approved.

An operator who wants only reviewed project hooks to run lists their digests in
`sources.project_digests`; project hooks whose digest is not listed do not load. The digest
covers the hooks file and every file inside the repository that one of its command hooks
names (a script run by path, or a file given to an interpreter: `python3
.cursor/hooks/x.py`, `"$CURSOR_PROJECT_DIR"/hooks/x.sh`), with its executable bit, so
changing a script (or its mode) invalidates an approval as surely as changing the hooks
file. Files a script reads or imports by itself are not covered: pin what the commands name.

`cloudrunner hooks digest [DIR]` prints the digest to approve and what it covers.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.claude_config import parse_claude_settings
from cloudrunner.protocol.config import parse_hooks_file

DIGEST_PREFIX = "sha256:"
#: the recipe's version, part of what is hashed: a future change of what is covered gives
#: new digests instead of silently matching old approvals
_RECIPE = b"cloudrunner-project-hooks-digest-v1\n"
#: a script bigger than this is refused rather than hashed on every event
MAX_SCRIPT_BYTES = 16 * 1024 * 1024
_PROJECT_VARIABLES = ("$CURSOR_PROJECT_DIR", "${CURSOR_PROJECT_DIR}", "$CLAUDE_PROJECT_DIR",
                      "${CLAUDE_PROJECT_DIR}")  # fmt: skip


class DigestError(CloudrunnerError):
    pass


@dataclass(frozen=True)
class CoveredFile:
    #: the path relative to the repository root, as it is hashed
    path: str
    sha256: str
    executable: bool


@dataclass(frozen=True)
class HooksDigest:
    digest: str
    files: tuple[CoveredFile, ...]

    def render(self) -> str:
        lines = [self.digest]
        lines += [
            f"  {f.sha256[:16]}  {'x' if f.executable else '-'}  {f.path}" for f in self.files
        ]
        return "\n".join(lines)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:  # unbalanced quotes: fall back to whitespace, the sh would fail anyway
        return command.split()


def named_files(command: str, root: Path) -> list[str]:
    """The repository files a command names, as paths relative to `root` (resolved real
    paths, inside it; what resolves outside is not the repository's and is left out)."""
    real_root = os.path.realpath(root)
    found: list[str] = []
    for word in _words(command):
        for variable in _PROJECT_VARIABLES:
            if word.startswith(variable):
                word = "." + word[len(variable) :]
                break
        if not word or word.startswith("-") or "://" in word or os.path.isabs(word):
            continue
        candidate = os.path.realpath(os.path.join(real_root, word))
        if candidate == real_root or not _inside(candidate, real_root):
            continue
        if os.path.isfile(candidate):
            found.append(os.path.relpath(candidate, real_root))
    return found


def _hash_file(root: Path, relative: str) -> CoveredFile:
    path = root / relative
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise DigestError(f"cannot read {path} for the hooks digest: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise DigestError(f"{path} is not a regular file; the hooks digest covers files")
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


def compute(root: Path, hooks_bytes: bytes, hooks_file: str = ".cursor/hooks.json") -> HooksDigest:
    """The digest of a repository's project hooks, given the hooks file's bytes (the ones
    the loader read, so a file swapped in between cannot be approved by accident)."""
    # A Claude Code settings file (`.claude/settings*.json`) is read in Claude's form.
    parse = parse_claude_settings if hooks_file.startswith(".claude/") else parse_hooks_file
    parsed = parse(hooks_bytes, file=hooks_file)
    commands: Iterable[str] = ()
    if parsed.config is not None:
        commands = [
            entry.definition.command
            for entries in parsed.config.hooks.values()
            for entry in entries
            if entry.definition.type == "command" and entry.definition.command
        ]
    relative = sorted({name for command in commands for name in named_files(command, root)})
    covered = [
        CoveredFile(hooks_file, hashlib.sha256(hooks_bytes).hexdigest(), False),
        *(_hash_file(root, name) for name in relative if name != hooks_file),
    ]
    h = hashlib.sha256(_RECIPE)
    for f in covered:
        h.update(f"{f.path}\0{f.sha256}\0{int(f.executable)}\n".encode())
    return HooksDigest(DIGEST_PREFIX + h.hexdigest(), tuple(covered))


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
