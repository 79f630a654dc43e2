"""Canonical serialisation and record hashes (cloudrunner/audit/chain.py), payload digests."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.audit.chain import canonical_json, is_hash, record_hash
from cloudrunner.audit.digest import digest_text, digest_value

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_a_written_record_reserialises_to_the_hashed_bytes(record: dict[str, Any]) -> None:
    # verify recomputes hashes from parsed lines: parse(serialise(x)) must serialise the same.
    text = canonical_json(record)
    assert text.isascii()
    assert canonical_json(json.loads(text)) == text


def test_record_hash_leaves_out_the_hash_itself() -> None:
    record = {"seq": 0, "kind": "hook", "prev_hash": "0" * 64}
    digest = record_hash(record)
    assert record_hash({**record, "hash": digest}) == digest
    assert digest == hashlib.sha256(canonical_json(record).encode()).hexdigest()


def test_record_hash_changes_with_any_field() -> None:
    record = {"seq": 3, "kind": "hook", "outcome": "ok"}
    assert record_hash(record) != record_hash({**record, "outcome": "blocked"})


def test_is_hash_wants_64_lowercase_hex() -> None:
    assert is_hash("a" * 64)
    assert not is_hash("A" * 64)
    assert not is_hash("a" * 63)
    assert not is_hash(None)
    assert is_hash("0123456789abcdef" * 4)
    assert not is_hash("a" * 31 + "g" + "a" * 32)  # a non-hex digit inside, not at an end
    assert not is_hash("a" * 31 + " " + "a" * 32)


def test_digest_text_is_sha256_and_utf8_length() -> None:
    assert digest_text("héllo") == {
        "sha256": hashlib.sha256("héllo".encode()).hexdigest(),
        "length": 6,
    }
    assert digest_text(b"abc")["length"] == 3


def test_digest_value_digests_structures_by_their_canonical_json() -> None:
    edits = [{"old_string": "a", "new_string": "b"}]
    expected = digest_text('[{"new_string":"b","old_string":"a"}]')
    assert digest_value(edits) == expected
