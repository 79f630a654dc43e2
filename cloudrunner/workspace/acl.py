"""POSIX access control lists as Linux stores them: the `system.posix_acl_access` and
`system.posix_acl_default` extended attributes.

Pure functions over the kernel's binary format (a little-endian version word, then one
(tag u16, perm u16, id u32) triple per entry, sorted by tag and id), so a grant can be
computed, tested and written with `os.setxattr` without the `acl` package's tools.
"""

from __future__ import annotations

import stat
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

ACCESS = "system.posix_acl_access"
DEFAULT = "system.posix_acl_default"

VERSION = 2
USER_OBJ = 0x01
USER = 0x02
GROUP_OBJ = 0x04
GROUP = 0x08
MASK = 0x10
OTHER = 0x20
#: the id of the entries that name no one (owner, owning group, mask, other)
UNDEFINED_ID = 0xFFFFFFFF

READ, WRITE, EXECUTE = 4, 2, 1
_HEADER = struct.Struct("<I")
_ENTRY = struct.Struct("<HHI")
_NAMED = (USER, GROUP)
_TAGS = (USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER)


class AclFormatError(ValueError):
    """The bytes are not a POSIX ACL in the kernel's format."""


@dataclass(frozen=True, order=True, slots=True)
class Entry:
    tag: int
    id: int
    perm: int


def decode(data: bytes) -> tuple[Entry, ...]:
    """The entries of an ACL attribute value."""
    if len(data) < _HEADER.size or (len(data) - _HEADER.size) % _ENTRY.size:
        raise AclFormatError(f"an ACL of {len(data)} bytes is not a header plus whole entries")
    (version,) = _HEADER.unpack_from(data)
    if version != VERSION:
        raise AclFormatError(f"ACL version {version} is not {VERSION}")
    entries = []
    for offset in range(_HEADER.size, len(data), _ENTRY.size):
        tag, perm, ident = _ENTRY.unpack_from(data, offset)
        if tag not in _TAGS or perm > 7:
            raise AclFormatError(f"ACL entry tag {tag:#x} perm {perm} is not valid")
        entries.append(Entry(tag, ident if tag in _NAMED else UNDEFINED_ID, perm))
    return tuple(entries)


def encode(entries: Iterable[Entry]) -> bytes:
    """The attribute value of `entries`, sorted as the kernel requires."""
    ordered = sorted(entries)
    return _HEADER.pack(VERSION) + b"".join(_ENTRY.pack(e.tag, e.perm, e.id) for e in ordered)


def from_mode(mode: int) -> tuple[Entry, ...]:
    """The minimal ACL a file without one has: its permission bits."""
    return (
        Entry(USER_OBJ, UNDEFINED_ID, (mode >> 6) & 7),
        Entry(GROUP_OBJ, UNDEFINED_ID, (mode >> 3) & 7),
        Entry(OTHER, UNDEFINED_ID, mode & 7),
    )


def perm_of(entries: Iterable[Entry], tag: int, ident: int = UNDEFINED_ID) -> int | None:
    for entry in entries:
        if entry.tag == tag and entry.id == ident:
            return entry.perm
    return None


def with_users(entries: Iterable[Entry], grants: Mapping[int, int]) -> tuple[Entry, ...]:
    """`entries` with a named-user entry for each uid in `grants` holding at least the
    permissions given (an existing entry keeps what it had on top: a grant never takes
    anything away), and the mask widened to the union of the group class, as `setfacl -m`
    computes it. Other entries are left as they are."""
    kept: dict[tuple[int, int], int] = {}
    for entry in entries:
        kept[(entry.tag, entry.id)] = entry.perm
    for uid, perm in grants.items():
        kept[(USER, uid)] = kept.get((USER, uid), 0) | perm
    mask = 0
    for (tag, _), perm in kept.items():
        if tag in (USER, GROUP_OBJ, GROUP):
            mask |= perm
    named = any(tag in _NAMED for tag, _ in kept)
    if named:
        kept[(MASK, UNDEFINED_ID)] = kept.get((MASK, UNDEFINED_ID), 0) | mask
    return tuple(sorted(Entry(tag, ident, perm) for (tag, ident), perm in kept.items()))


def grants_hold(entries: Iterable[Entry], grants: Mapping[int, int]) -> bool:
    """Whether every uid in `grants` already has its permissions, through the mask."""
    listed = tuple(entries)
    mask = perm_of(listed, MASK)
    for uid, perm in grants.items():
        have = perm_of(listed, USER, uid)
        if have is None or (have & perm) != perm:
            return False
        if mask is not None and (mask & perm) != perm:
            return False
    return True


def owner_perm(mode: int) -> int:
    """The owner's permission bits of a mode (what a grant mirrors)."""
    return (mode & stat.S_IRWXU) >> 6
