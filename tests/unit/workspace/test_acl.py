"""The POSIX ACL attribute format and grant arithmetic (pure; no file system)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.workspace import acl
from cloudrunner.workspace.acl import Entry

_OBJ = acl.UNDEFINED_ID
perms = st.integers(0, 7)
uids = st.integers(1, 2**31 - 1)


@st.composite
def acls(draw: st.DrawFn) -> tuple[Entry, ...]:
    base = list(acl.from_mode(draw(st.integers(0, 0o777))))
    users = draw(st.dictionaries(uids, perms, max_size=4))
    groups = draw(st.dictionaries(uids, perms, max_size=3))
    base += [Entry(acl.USER, u, p) for u, p in users.items()]
    base += [Entry(acl.GROUP, g, p) for g, p in groups.items()]
    if users or groups:
        base.append(Entry(acl.MASK, _OBJ, draw(perms)))
    return tuple(sorted(base))


@given(acls())
def test_encode_then_decode_is_the_identity(entries: tuple[Entry, ...]) -> None:
    assert acl.decode(acl.encode(entries)) == entries


@given(acls(), st.dictionaries(uids, perms, min_size=1, max_size=3))
def test_a_grant_holds_afterwards_and_takes_nothing_away(
    entries: tuple[Entry, ...], grants: dict[int, int]
) -> None:
    after = acl.with_users(entries, grants)
    assert acl.grants_hold(after, grants)
    for entry in entries:
        if entry.tag == acl.MASK:
            continue
        # every entry that was there keeps at least its permissions
        assert (acl.perm_of(after, entry.tag, entry.id) or 0) & entry.perm == entry.perm
    # the owner, owning group and other entries are untouched
    for tag in (acl.USER_OBJ, acl.GROUP_OBJ, acl.OTHER):
        assert acl.perm_of(after, tag) == acl.perm_of(entries, tag)
    # the mask covers the whole group class, and the list is in the kernel's order
    mask = acl.perm_of(after, acl.MASK)
    assert mask is not None
    for entry in after:
        if entry.tag in (acl.USER, acl.GROUP, acl.GROUP_OBJ):
            assert entry.perm & mask == entry.perm
    assert list(after) == sorted(after)


def test_the_kernel_layout_is_little_endian_tag_perm_id() -> None:
    data = acl.encode(acl.with_users(acl.from_mode(0o640), {10001: 6}))
    assert data[:4] == struct.pack("<I", 2)
    triples = [struct.unpack_from("<HHI", data, 4 + 8 * i) for i in range((len(data) - 4) // 8)]
    assert triples == [
        (acl.USER_OBJ, 6, _OBJ),
        (acl.USER, 6, 10001),
        (acl.GROUP_OBJ, 4, _OBJ),
        (acl.MASK, 6, _OBJ),
        (acl.OTHER, 0, _OBJ),
    ]


def test_a_minimal_acl_gets_no_mask_and_a_grant_is_not_held_through_a_narrow_mask() -> None:
    assert acl.perm_of(acl.with_users(acl.from_mode(0o755), {}), acl.MASK) is None
    narrowed = (*acl.from_mode(0o700), Entry(acl.USER, 5, 7), Entry(acl.MASK, _OBJ, 4))
    assert not acl.grants_hold(narrowed, {5: 6})
    assert acl.grants_hold(narrowed, {5: 4})


@pytest.mark.parametrize(
    "data",
    [b"", b"\x02\x00\x00", b"\x01\x00\x00\x00", struct.pack("<IHHI", 2, 0x40, 7, 0)],
)
def test_damaged_attribute_values_are_refused(data: bytes) -> None:
    with pytest.raises(acl.AclFormatError):
        acl.decode(data)
