"""Repository locations: https, http, ssh, `file://` or a local path, parsed into what git is
given (never a password) and redacted for messages and records."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import SplitResult, urlsplit, urlunsplit

from cloudrunner.workspace.checkout import RepositoryNotFound, WorkspaceError
from cloudrunner.workspace.git_credentials import Secret

LocationKind = Literal["https", "http", "ssh", "file", "local"]
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?[^@/:\s]+:(?!//)")


@dataclass(frozen=True)
class GitSource:
    kind: LocationKind
    url: str  # what git is given: never carries a password
    username: str | None
    password: Secret | None


def classify_source(source: str) -> LocationKind:
    """Which kind of repository location `source` is (https, http, ssh, file or local)."""
    return parse_source(source).kind


def redact_url(source: str) -> str:
    """`source` without user info (a password or token in a URL), for messages and records."""
    text = source.strip()
    if "://" not in text:
        return text
    try:
        return _strip_userinfo(urlsplit(text))
    except ValueError:
        return "<unparseable repository URL>"


def parse_source(source: str) -> GitSource:
    text = source.strip()
    if not text:
        raise WorkspaceError("the repository location is empty; give a URL or a path")
    if "://" in text:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme in ("http", "https"):
            host = parts.hostname or ""
            if not host:
                raise WorkspaceError(f"repository URL {_strip_userinfo(parts)} has no host")
            password = Secret(parts.password) if parts.password else None
            kind: LocationKind = "https" if scheme == "https" else "http"
            return GitSource(kind, _strip_userinfo(parts), parts.username, password)
        if scheme in ("ssh", "git+ssh", "ssh+git"):
            if parts.password:
                raise WorkspaceError(
                    "ssh repository URLs cannot carry a password; use an ssh key "
                    "(credentials ssh_key_file) instead"
                )
            return GitSource("ssh", text, None, None)
        if scheme == "file":
            return GitSource("file", text, None, None)
        raise WorkspaceError(
            f"repository URL scheme {scheme!r} is not supported; use https, http, ssh, "
            "file:// or a local path"
        )
    if text.startswith("ext::") or text.startswith("-"):
        raise WorkspaceError(f"repository location {text!r} is not a URL or a path")
    if Path(text).exists():
        return GitSource("local", str(Path(text).resolve()), None, None)
    if _SCP_LIKE.match(text) and not text.startswith(("/", ".")):
        return GitSource("ssh", text, None, None)
    raise RepositoryNotFound(
        f"repository {text} does not exist: it is neither a path on this machine nor a "
        "URL; check the --repo value"
    )


def _strip_userinfo(parts: SplitResult) -> str:
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
