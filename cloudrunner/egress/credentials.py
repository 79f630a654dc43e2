"""Per-run proxy credentials: how the proxy tells which hook run made a connection.

Each hook run that may use the proxy gets its own user name, `<source>.<run id>`, and a
password only the worker can make: the first 40 hex digits of HMAC-SHA256(key, user name).
The proxy's helper checks it with the same key (mounted read-only), so a hook cannot pose as
another source, and every access-log line names the run it came from.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote

from cloudrunner.egress.rules import PROXY_HOST, PROXY_PORT

#: how long a run's attribution is kept after it was issued (late log lines still resolve)
KEEP_S = 3600.0


def password(key: bytes, user: str) -> str:
    return hmac.new(key, user.encode(), hashlib.sha256).hexdigest()[:40]


@dataclass(frozen=True)
class RunAttribution:
    """What a connection made with one run's credential is recorded against."""

    source: str
    event: str
    conversation_id: str
    generation_id: str
    hook_id: str
    command: str


class CredentialIssuer:
    """Makes per-run credentials and remembers what each is for; thread-safe."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._lock = threading.Lock()
        self._runs: dict[str, tuple[float, RunAttribution]] = {}

    def issue(self, attribution: RunAttribution) -> str:
        """A user name for one hook run (its password is `password(key, user)`)."""
        user = f"{attribution.source}.{secrets.token_hex(8)}"
        now = time.monotonic()
        with self._lock:
            self._runs[user] = (now, attribution)
            if len(self._runs) > 4096:
                self._runs = {u: v for u, v in self._runs.items() if now - v[0] < KEEP_S}
        return user

    def proxy_url(self, user: str) -> str:
        secret = password(self._key, user)
        return f"http://{quote(user, safe='')}:{secret}@{PROXY_HOST}:{PROXY_PORT}"

    def environment(self, attribution: RunAttribution) -> dict[str, str]:
        """The proxy variables of one hook run (both spellings: tools read either)."""
        url = self.proxy_url(self.issue(attribution))
        return {
            "HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
            "NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
        }  # fmt: skip

    def lookup(self, user: str) -> RunAttribution | None:
        with self._lock:
            found = self._runs.get(user)
        return found[1] if found else None
