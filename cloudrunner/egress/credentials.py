"""Per-run proxy credentials: how the proxy tells which hook run made a connection, and
refuses a credential outside its run.

Each hook run that may use the proxy gets its own user name, `<source>.<run id>`, and a
password only the worker can make: the first 40 hex digits of HMAC-SHA256(key, user name).
The proxy's password helper checks it with the same key (mounted read-only), so a hook
cannot pose as another source. The credential is also a grant (`grants`): good from its
sandbox's own network only, until its run ends or its timeout passes; the proxy's run
check refuses it anywhere else and at any other time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from urllib.parse import quote, unquote, urlsplit

from cloudrunner.egress.grants import SLACK_S, Grant, GrantBook, RunAttribution
from cloudrunner.egress.rules import PROXY_HOST, PROXY_PORT

__all__ = ["CredentialIssuer", "RunAttribution", "password", "user_of"]


def password(key: bytes, user: str) -> str:
    return hmac.new(key, user.encode(), hashlib.sha256).hexdigest()[:40]


def user_of(proxy_url: str) -> str | None:
    """The user name of a proxy URL this issuer made, or None."""
    try:
        name = urlsplit(proxy_url).username
    except ValueError:
        return None
    return unquote(name) if name else None


class CredentialIssuer:
    """Makes per-run credentials and grants them for one run; thread-safe."""

    def __init__(self, key: bytes, book: GrantBook) -> None:
        self._key = key
        self.book = book

    def issue(
        self,
        attribution: RunAttribution,
        *,
        network: str,
        subnets: tuple[str, ...],
        lifetime_s: float,
    ) -> str:
        """A user name for one hook run (its password is `password(key, user)`), live from
        `subnets` for `lifetime_s` (the run's timeout) unless its run ends first."""
        user = f"{attribution.source}.{secrets.token_hex(8)}"
        now = time.time()
        self.book.issue(
            Grant(
                user=user, run=attribution, network=network, subnets=subnets, issued=now,
                expires=now + lifetime_s + SLACK_S,
            )
        )  # fmt: skip
        return user

    def proxy_url(self, user: str) -> str:
        secret = password(self._key, user)
        return f"http://{quote(user, safe='')}:{secret}@{PROXY_HOST}:{PROXY_PORT}"

    def environment(self, user: str) -> dict[str, str]:
        """The proxy variables of one hook run (both spellings: tools read either)."""
        url = self.proxy_url(user)
        return {
            "HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
            "NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
        }  # fmt: skip

    def lookup(self, user: str) -> Grant | None:
        return self.book.lookup(user)
