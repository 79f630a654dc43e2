"""Secret redaction for everything that reaches the audit log, and capped excerpts.

Hooks print whatever they like, and command lines carry credentials more often than anyone
intends, so every string in an audit record passes through `redact` before it is written.
The patterns aim at false positives rather than misses: an audit record with one word too
many blanked out is harmless, a token in it is not. `redact` is idempotent (redacting its own
output changes nothing), so a value redacted by the runner and again by the pipeline stays
the same.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

REDACTED = "[REDACTED]"

#: Excerpts are redacted over this much more than their cap, so a secret that straddles
#: the cap is still recognised whole (and its visible head blanked) before the cut.
_REDACTION_MARGIN = 4096

# A variable or key name that looks like it holds a secret. "auth" alone would catch
# "author", so only its secret-bearing forms are listed. The assignment patterns below match
# any name and ask this one afterwards: a keyword inside a lazily-scanned name would make the
# regex quadratic on long words, and hook output is untrusted input.
_SECRET_NAME = re.compile(
    r"(?i)passw(?:or)?d|passphrase|secret|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|credential|session[_-]?id|cookie|auth[_-]?key"
    r"|signing[_-]?key|encryption[_-]?key"
)

_Sub = tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]


def _keep_quotes(match: re.Match[str]) -> str:
    if not _SECRET_NAME.search(match.group("name")):
        return match.group(0)
    value = match.group("value")
    quote = value[0] if value[:1] in ("'", '"') and len(value) >= 2 else ""
    return f"{match.group('name')}{match.group('sep')}{quote}{REDACTED}{quote}"


# Order matters: whole blocks and headers first, so the generic `NAME=value` rule later
# does not stop at the first word of a header value and leave the token behind it.
_SUBSTITUTIONS: tuple[_Sub, ...] = (
    # PEM private keys; an unterminated block (cut by a cap) is blanked to the end.
    (
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"
        ),
        f"-----BEGIN PRIVATE KEY-----{REDACTED}-----END PRIVATE KEY-----",
    ),
    # Authorization headers: keep the scheme, drop the credential.
    (
        re.compile(
            r"(?i)(?P<name>\b(?:proxy-)?authorization)(?P<sep>[\"']?\s*[:=]\s*[\"']?)"
            r"(?:(?P<scheme>bearer|basic|token|digest|negotiate)\s+)?(?P<cred>[^\s\"',;]+)"
        ),
        lambda m: (
            f"{m.group('name')}{m.group('sep')}"
            f"{m.group('scheme') + ' ' if m.group('scheme') else ''}{REDACTED}"
        ),
    ),
    (re.compile(r"(?i)\b(?P<scheme>bearer)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\g<scheme> {REDACTED}"),
    # Credentials inside URLs: scheme://user:password@host
    (
        re.compile(
            r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]{0,31}://[^\s/@:]{0,256}:)[^\s/@]{1,512}(?P<at>@)"
        ),
        rf"\g<head>{REDACTED}\g<at>",
    ),
    # Well-known token shapes, in one pass (each pass over a long text costs): AWS access
    # key ids, GitHub (classic prefixes and fine-grained PATs), GitLab, Slack, Stripe,
    # Google, OpenAI-style keys, JWTs.
    (
        re.compile(
            r"\b(?:(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|A3T[A-Z0-9])[A-Z0-9]{16}\b"
            r"|gh[pousr]_[A-Za-z0-9]{20,}\b|github_pat_[A-Za-z0-9_]{20,}\b"
            r"|glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}"
            r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|AIza[0-9A-Za-z_-]{35}|sk-[A-Za-z0-9_-]{20,}"
            r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
        ),
        REDACTED,
    ),
    # Command-line flags: --password hunter2, --api-key=xyz
    (
        re.compile(
            r"(?P<name>(?<![\w-])--?[\w.-]+)(?P<sep>=|\s+)(?!-)"
            r"(?P<value>\[REDACTED\]|\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s\"']+)"
        ),
        _keep_quotes,
    ),
    # NAME=value, NAME: value, "name": "value", with a secret-looking name.
    (
        re.compile(
            r"(?P<name>(?<![\w.-])[\w.-]+[\"']?)(?P<sep>\s*[:=]\s*)"
            r"(?P<value>\[REDACTED\]|\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s\"',;&|)}\]]+)"
        ),
        _keep_quotes,
    ),
)


# Every pattern above needs one of these somewhere in the text (the assignment and flag
# patterns need a secret-looking name, so its keywords stand in for them). Most strings in
# a record (ids, hashes, paths, times, outcomes) have none, and one search is far cheaper
# than all the substitutions: the per-event path stays fast.
_TRIGGER = re.compile(
    r"(?i)passw|passphrase|secret|token|api[_-]?key|access[_-]?key|private|credential"
    r"|session|cookie|auth|signing|encryption|bearer|://|-----begin"
    r"|akia|asia|agpa|aida|aroa|anpa|anva|aipa|a3t|gh[pousr]_|github_pat_|glpat-"
    r"|xox[abprs]-|[sr]k_(?:live|test)_|aiza|sk-|eyj"
)
_CACHED_LENGTH = 256


def redact(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED]`."""
    if len(text) <= _CACHED_LENGTH:
        return _redact_short(text)
    return _redact(text)


def _redact(text: str) -> str:
    if not _TRIGGER.search(text):
        return text
    for pattern, replacement in _SUBSTITUTIONS:
        text = pattern.sub(replacement, text)
    return text


# Commands, paths and limits repeat from record to record; remembering short results
# saves the patterns on almost every hook record.
_redact_short = functools.lru_cache(maxsize=4096)(_redact)


def excerpt(data: bytes | str, cap: int) -> str:
    """A redacted excerpt of a hook's stdout or stderr: at most `cap` characters of text.

    Invalid UTF-8 becomes U+FFFD rather than failing, since hooks may print binary. A cut
    excerpt ends with a marker giving the full size, so a reader knows text is missing.
    """
    if cap < 0:
        raise ValueError(f"excerpt cap must be >= 0, got {cap}")
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    window = raw[: cap + _REDACTION_MARGIN]
    text = redact(window.decode("utf-8", "replace"))
    if len(text) <= cap and len(window) == len(raw):
        return text
    return f"{text[:cap]}…[truncated: {len(raw)} bytes in total]"
