"""The three hooks measured everywhere: trivial, bash + jq, python3.

Each reads the event JSON on stdin and answers on stdout, as real hooks do. The bare
baseline runs the same command text on the host with the container's PATH (so `python3`
is the interpreter itself, never a version-manager shim).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

EVENT = "beforeShellExecution"
PAYLOAD = json.dumps(
    {"hook_event_name": EVENT, "command": "ls -la", "cwd": "/tmp", "conversation_id": "bench"}
).encode()
#: the PATH of the runtime image, used for the bare baseline too
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class HookCase:
    name: str
    command: str
    #: what the hook prints for PAYLOAD (checked on every run: a broken hook is no figure)
    expected: bytes


CAT = HookCase("cat", "cat", PAYLOAD)
JQ = HookCase(
    "bash+jq",
    """bash -c 'jq -c "{permission: (if (.command | test(\\"rm \\")) then \\"deny\\" """
    """else \\"allow\\" end)}"'""",
    b'{"permission":"allow"}\n',
)
PYTHON = HookCase(
    "python3",
    "python3 -c 'import json, sys; e = json.load(sys.stdin); "
    """print(json.dumps({"permission": "deny" if "rm " in e["command"] else "allow"}))'""",
    b'{"permission": "allow"}\n',
)
CASES = (CAT, JQ, PYTHON)
