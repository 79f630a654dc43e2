"""Payload text reduced to a digest: what the audit log stores instead of prompts and files.

An audit log is read by more people than the conversation it records, so prompt text, file
contents and tool outputs are kept as sha256 and length only (unless the operator opts in):
enough to prove later which text it was, not enough to read it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypedDict


class TextDigest(TypedDict):
    #: lowercase hex sha256 of the text's UTF-8 bytes
    sha256: str
    #: the number of UTF-8 bytes
    length: int


#: Keys, at any depth of a record, whose values are payload text and are digested.
PAYLOAD_TEXT_KEYS: frozenset[str] = frozenset(
    {
        "prompt",  # beforeSubmitPrompt
        "content",  # beforeReadFile, beforeTabFileRead
        "contents",  # Write tool input
        "text",  # afterAgentResponse, afterAgentThought
        "output",  # afterShellExecution
        "tool_output",  # postToolUse
        "result_json",  # afterMCPExecution
        "edits",  # afterFileEdit, afterTabFileEdit (old and new file text)
        "old_string",
        "new_string",
        "old_line",
        "new_line",
        "messages_to_compact",  # preCompact
        "updated_mcp_tool_output",
        "task",  # subagentStart/Stop: the subagent's prompt
        "summary",  # subagentStop: the subagent's own text
    }
)


def digest_text(text: str | bytes) -> TextDigest:
    """sha256 and byte length of `text` (str is taken as UTF-8)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return {"sha256": hashlib.sha256(data).hexdigest(), "length": len(data)}


def digest_value(value: Any) -> TextDigest:
    """Digest of a payload value: a string as itself, anything else as its canonical JSON."""
    if isinstance(value, str | bytes):
        return digest_text(value)
    return digest_text(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
