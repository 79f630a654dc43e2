"""The Python client's reading of fail-policy.json: bounded and never blocking (the
two-client test tests/e2e/test_clients_policy_files.py runs both clients as processes)."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.client import no_daemon as client_fallback


def test_brackets_inside_strings_do_not_count() -> None:
    text = b'{"a": "' + b"[" * 100 + b'\\"' + b'"}'
    assert not client_fallback._nesting_over(text, 64)
    assert client_fallback._nesting_over(b"[" * 65, 64)
    assert not client_fallback._nesting_over(b"[" * 64, 64)


@given(st.recursive(st.none() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                    max_leaves=40))  # fmt: skip
def test_nesting_is_measured_as_json_nests(value: object) -> None:
    import json

    def depth(v: object) -> int:
        if isinstance(v, list):
            return 1 + max((depth(x) for x in v), default=0)
        if isinstance(v, dict):
            return 1 + max((depth(x) for x in v.values()), default=0)
        return 0

    raw = json.dumps(value).encode()
    limit = max(depth(value) - 1, 0)
    assert client_fallback._nesting_over(raw, limit) is (depth(value) > limit)


def test_a_fifo_with_no_writer_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fail-policy.json")
    decision = client_fallback.decide("preToolUse", None, None, str(tmp_path))
    assert not decision.closed and decision.notes == [
        f"cloudrunner: the fail policy {tmp_path}/fail-policy.json is not usable (not a "
        "regular file); failing open"
    ]
