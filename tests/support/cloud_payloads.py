"""One plausible payload of each of the 14 cloud events (their own fields), for tests that
send every event through a real agent configuration."""

from __future__ import annotations

import json
from typing import Any

#: event -> its own fields (the base fields are the caller's)
FIELDS: dict[str, dict[str, Any]] = {
    "preToolUse": {"tool_name": "Shell", "tool_input": {"command": "ls"}, "tool_use_id": "t1"},
    "postToolUse": {"tool_name": "Shell", "tool_input": {"command": "ls"},
                    "tool_output": "README.md", "tool_use_id": "t1", "duration": 5},
    "postToolUseFailure": {"tool_name": "Shell", "tool_input": {"command": "false"},
                           "tool_use_id": "t2", "error_message": "exit 1",
                           "failure_type": "error", "duration": 3, "is_interrupt": False},
    "subagentStart": {"subagent_type": "explore", "prompt": "look around"},
    "subagentStop": {"subagent_type": "explore", "status": "completed", "result": "done"},
    "beforeShellExecution": {"command": "ls", "cwd": ""},
    "afterShellExecution": {"command": "ls", "output": "README.md", "duration": 4},
    "beforeReadFile": {"file_path": "README.md", "content": "# demo\n", "attachments": []},
    "afterFileEdit": {"file_path": "README.md", "edits": []},
    "beforeSubmitPrompt": {"prompt": "tidy the README", "attachments": []},
    "preCompact": {"trigger": "auto", "context_usage_percent": 91, "context_tokens": 91000,
                   "context_window_size": 100000, "message_count": 40,
                   "messages_to_compact": 30, "is_first_compaction": True},
    "stop": {"status": "completed", "loop_count": 0},
    "afterAgentResponse": {"text": "Done."},
    "afterAgentThought": {"text": "thinking", "duration_ms": 12},
}  # fmt: skip


def payload(event: str, workspace: str, **fields: Any) -> dict[str, Any]:
    return {
        "conversation_id": "conv-vm",
        "generation_id": f"gen-{event}",
        "model": "test-model",
        "hook_event_name": event,
        "cursor_version": "1.7.0",
        "workspace_roots": [workspace],
        "user_email": "dev@example.invalid",
        "transcript_path": None,
        **FIELDS[event],
        **fields,
    }


def shell_payload(command: str = "ls", cwd: str = "/", conversation_id: str = "c1") -> bytes:
    """A beforeShellExecution payload of `command`, encoded as a hook's stdin."""
    return json.dumps(
        {"hook_event_name": "beforeShellExecution", "conversation_id": conversation_id,
         "command": command, "cwd": cwd}
    ).encode()  # fmt: skip
