"""Enterprise hook: refuses prompts that carry something shaped like a credential."""

import json
import re
import sys

SECRET = re.compile(r"AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{36}|-----BEGIN [A-Z ]*PRIVATE KEY-----")

event = json.load(sys.stdin)
if SECRET.search(event.get("prompt", "")):
    json.dump(
        {
            "continue": False,
            "user_message": "This prompt contains what looks like a credential; remove it first.",
        },
        sys.stdout,
    )
else:
    json.dump({"continue": True}, sys.stdout)
