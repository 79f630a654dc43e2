"""How large a record may grow: long strings cut, with the digest of what was cut.

An event's payload is stored once, in the record that answers it (`decision`, `gated` or
`refused`). Every other string of a record (ids, the hook command, match reasons, messages
of the answer, ...) is cut at a fixed length and ends with the size and sha256 of the whole
value, so a record stays within a fixed multiple of its payload whatever the payload holds
(a 3 MB conversation_id was copied into every record of its event, twice).
"""

from __future__ import annotations

import re

from cloudrunner.audit.digest import digest_text
from cloudrunner.audit.redaction import redact

#: ids (conversation, generation, session) longer than this are cut
ID_CAP = 256
#: any other string of a record outside its payload and its excerpts
TEXT_CAP = 4096
#: top-level fields whose strings are cut at ID_CAP
ID_KEYS = frozenset({"session", "conversation_id", "generation_id"})
#: top-level fields left whole: the event's payload (its one copy), and the excerpts (cut
#: at the log's own excerpt cap already)
UNCAPPED_KEYS = frozenset({"payload", "stdout_excerpt", "stderr_excerpt"})

# The head is redacted over this much more than it keeps, so a secret that straddles the
# cut is recognised whole before it is cut (as excerpts are).
_MARGIN = 4096
_CUT_MARK = re.compile(r"…\[cut: \d+ bytes, sha256 [0-9a-f]{64}\]\Z")


def cap_for(key: str) -> int | None:
    """The cap of the strings under a record's top-level `key` (None: left whole)."""
    if key in UNCAPPED_KEYS:
        return None
    return ID_CAP if key in ID_KEYS else TEXT_CAP


def bounded(text: str, cap: int) -> str:
    """`text` redacted, and when longer than `cap` characters cut to its first `cap` with
    `…[cut: N bytes, sha256 H]` (N and H of the whole text as given, UTF-8). A text this
    function already cut is not cut again."""
    if len(text) <= cap:
        return redact(text)
    mark = _CUT_MARK.search(text)
    if mark is not None and mark.start() <= cap:
        return redact(text)  # redacted again: the mark may be forged, the head not clean
    digest = digest_text(text)
    head = redact(text[: cap + _MARGIN])[:cap]
    return f"{head}…[cut: {digest['length']} bytes, sha256 {digest['sha256']}]"
