"""afterFileEdit formatter: strips trailing whitespace and ends the file with one newline."""

import json
import os
import sys

event = json.load(sys.stdin)
path = event.get("file_path", "")
root = os.environ["CURSOR_PROJECT_DIR"]
full = os.path.realpath(os.path.join(root, path))
if not full.startswith(os.path.realpath(root) + os.sep) or not os.path.isfile(full):
    print(f"format: not a file in the workspace: {path}", file=sys.stderr)
    sys.exit(0)
with open(full, encoding="utf-8") as fh:
    text = fh.read()
formatted = "\n".join(line.rstrip() for line in text.splitlines()).rstrip("\n") + "\n"
if formatted != text:
    with open(full, "w", encoding="utf-8") as fh:
        fh.write(formatted)
    print(f"format: rewrote {path}", file=sys.stderr)
print("{}")
