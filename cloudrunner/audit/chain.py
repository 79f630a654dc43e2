"""The hash chain: canonical serialisation of a record and the hash that links records.

A record's `hash` is the sha256 of its canonical JSON without the `hash` key: keys sorted,
no whitespace, ASCII only (non-ASCII escaped), no NaN or infinities. Because a record holds
only JSON values, parsing a written line and serialising it again gives the same bytes, so
`verify` can recompute every hash from the file alone. Each record carries the previous
record's hash in `prev_hash`; the first record of a log carries `GENESIS_HASH`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

GENESIS_HASH = "0" * 64

#: Keys the chain owns; a caller's fields may not set them.
CHAIN_KEYS = frozenset({"seq", "prev_hash", "hash"})


def canonical_json(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


def record_hash(record: Mapping[str, Any]) -> str:
    """The hash a record must carry: over everything in it except `hash` itself."""
    body = {key: value for key, value in record.items() if key != "hash"}
    return hashlib.sha256(canonical_json(body).encode("ascii")).hexdigest()


def is_hash(value: object) -> bool:
    """A sha256 hex digest as the chain writes it: 64 lowercase hex digits."""
    # strip() removes the hex digits from both ends: nothing is left only when all were
    # hex (a C loop; a generator over the characters was a quarter of `verify`'s time)
    return isinstance(value, str) and len(value) == 64 and not value.strip(_HEX_DIGITS)


_HEX_DIGITS = "0123456789abcdef"
