"""`record_json`: orjson where its text is the canonical JSON's, `canonical_json` elsewhere.
The chain's hashes are over that text and `audit verify` recomputes them with
`canonical_json`, so the two must agree on every record, byte for byte."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cloudrunner.audit.chain import canonical_json
from cloudrunner.audit.processors import record_json

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()  # over 64 bits too: orjson refuses them
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()  # non-ASCII, control characters, DEL and lone surrogates
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(st.text(), _VALUES, max_size=6))
def test_the_text_is_canonical_json_for_any_record(record: dict[str, Any]) -> None:
    assert record_json(record) == canonical_json(record)


def test_the_numbers_json_spells_its_own_way_are_spelled_as_json_does() -> None:
    record = {"tiny": 1e-05, "small": -2.5e-07, "big": 1e22, "huge": 2**70, "neg": -(2**64)}
    assert record_json(record) == canonical_json(record)
    assert '"tiny":1e-05' in record_json(record)


def test_text_orjson_would_leave_raw_is_escaped_as_json_does() -> None:
    record = {"del": "a\x7fb", "accent": "caf\u00e9", "lone": "\ud800", "k\u00e9y": 1}
    assert record_json(record) == canonical_json(record)
    assert "\\u007f" in record_json(record) and "\\udcff" not in record_json(record)


def test_a_string_that_looks_like_a_number_changes_nothing() -> None:
    record = {"a": "x:1e5", "b": [0.5, "[0.00001"], "hash": "3e" * 32}
    assert record_json(record) == canonical_json(record)
