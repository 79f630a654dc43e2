"""Squid basic-auth helper: a hook's proxy credential is `<source>.<run>` with a password
that only the worker can make (an HMAC of the user name under a key the worker mounts).

Squid's helper protocol: one line per request, "USER PASSWORD" (each URL-encoded), answered
by one line, "OK" or "ERR". Standard library only.
"""

import hashlib
import hmac
import sys
import urllib.parse


def main() -> int:
    with open(sys.argv[1], "rb") as fh:
        key = fh.read().strip()
    for line in sys.stdin:
        parts = line.strip().split(" ")
        ok = False
        if len(parts) == 2:
            user, password = (urllib.parse.unquote(p) for p in parts)
            expected = hmac.new(key, user.encode(), hashlib.sha256).hexdigest()[:40]
            ok = hmac.compare_digest(expected, password)
        sys.stdout.write("OK\n" if ok else "ERR\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
