"""Squid external ACL helper: is this credential's run live, and does the connection come
from the sandbox network it was issued to?

The worker keeps the live grants in a JSON file (mounted read-only):
{"grants": {"<user>": {"subnets": ["172.20.0.0/16"], "expires": <unix time>}}}; a run's
grant is removed when the run ends. Squid sends one line per request, "CLIENT USER [...]"
(URL-encoded), and reads one line back: "OK", or "ERR log=<why>" (the reason is written to
the access log). Nothing is cached: every request is checked. Standard library only.
"""

import ipaddress
import json
import os
import sys
import time
import urllib.parse

_grants: dict = {}
_stamp = None


def _load(path):
    global _grants, _stamp
    try:
        st = os.stat(path)
    except OSError:
        _grants, _stamp = {}, None
        return
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    if stamp == _stamp:
        return
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        grants = data.get("grants") if isinstance(data, dict) else None
        _grants = grants if isinstance(grants, dict) else {}
    except (OSError, ValueError):
        _grants = {}  # a torn or broken file lets nothing through
    _stamp = stamp


def decide(path, client, user):
    _load(path)
    grant = _grants.get(user)
    if not isinstance(grant, dict):
        return "not-live"  # never issued, or its run has ended
    try:
        if float(grant.get("expires", 0)) <= time.time():
            return "expired"
        address = ipaddress.ip_address(client)
        if not any(address in ipaddress.ip_network(s) for s in grant.get("subnets") or ()):
            return "wrong-source"
    except (TypeError, ValueError):
        return "wrong-source"
    return ""


def main():
    path = sys.argv[1]
    for line in sys.stdin:
        parts = [urllib.parse.unquote(p) for p in line.split()]
        why = decide(path, parts[0], parts[1]) if len(parts) >= 2 else "malformed"
        sys.stdout.write("OK\n" if not why else f"ERR log={why}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
