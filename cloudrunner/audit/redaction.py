"""Secret redaction for everything the worker stores or serves, and capped excerpts.

Two ways a secret is recognised:

- **by the name it is given**: a mapping key, a `NAME=value` / `NAME: value` / `"name":
  "value"` assignment, a `--flag value`, a `{"name": "DB_PASSWORD", "value": ...}` pair
  (`is_secret_name` says which names hold secrets);
- **by its own shape**: PEM private key blocks, `Authorization` headers and bearer tokens,
  passwords in URLs, and the token formats of detect-secrets' plugins (AWS, GitHub, GitLab,
  Slack, Stripe, JWT, ...), taken from the installed package so they stay maintained.

`redact(text)` is the one function for free text and URLs (callers outside the audit log use
it too: messages, session lists); `redact_value` walks JSON data and adds the key names. The
patterns aim at false positives rather than misses: an audit record with one word too many
blanked out is harmless, a token in it is not. Redaction is idempotent (redacting its own
output changes nothing), so a value redacted by the runner and again by the pipeline stays
the same.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

REDACTED = "[REDACTED]"

#: Excerpts are redacted over this much more than their cap, so a secret that straddles
#: the cap is still recognised whole (and its visible head blanked) before the cut.
_REDACTION_MARGIN = 4096

# ---------------------------------------------------------------------------- names

# Spelled without separators ("api_key", "x-api-key", "apiKey" all hold "apikey").
_SECRET_PARTS = (
    "password", "passwd", "passphrase", "secret", "apikey", "privatekey", "accesskey",
    "credential", "authorization", "cookie", "authtoken",
)  # fmt: skip
#: whole words that are secret on their own ("token", but not "tokens" or "context_tokens")
_SECRET_WORDS = frozenset({"token", "auth", "pass", "secrets"})
#: the last word of a name of two or more words: *_KEY, *_SECRET, *_TOKEN, *_PASSWORD
_SECRET_LAST_WORDS = frozenset({"key", "secret", "token", "password", "pass", "pw"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_NOT_ALNUM = re.compile(r"[^a-z0-9]")


def is_secret_name(name: str) -> bool:
    """Whether a key or variable called `name` holds a secret: password, passwd, pass,
    secret, token, auth, api key, access key, authorization, cookie, private key,
    credentials, and any name of two or more words ending in KEY, SECRET, TOKEN, PASSWORD,
    PASS or PW, in any case and spelling
    (`DB_PASSWORD`, `x-api-key`, `accessToken`). `tokens`, `context_tokens`, `session_id`
    and other protocol fields are not secret."""
    # Keys repeat from payload to payload, so short names are remembered; a long one (from
    # an untrusted payload) is judged afresh, so the cache never holds megabytes.
    return _secret_name_cached(name) if len(name) <= 256 else _secret_name(name)


def _secret_name(name: str) -> bool:
    squashed = _NOT_ALNUM.sub("", name.lower())
    if any(part in squashed for part in _SECRET_PARTS):
        return True
    words = [word.lower() for word in _WORD.findall(name)]
    if any(word in _SECRET_WORDS for word in words):
        return True
    return len(words) >= 2 and words[-1] in _SECRET_LAST_WORDS


_secret_name_cached = functools.lru_cache(maxsize=8192)(_secret_name)


# In free text a name is also taken as secret when it merely contains one of these (an
# environment variable such as MYTOKEN or SESSION_ID), since nothing downstream parses it.
_TEXT_SECRET_NAME = re.compile(
    r"(?i)passw(?:or)?d|passphrase|secret|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|credential|session[_-]?id|cookie|auth[_-]?key"
    r"|signing[_-]?key|encryption[_-]?key"
)


def _text_secret_name(name: str) -> bool:
    bare = name.strip("\\\"'")
    return bool(_TEXT_SECRET_NAME.search(bare)) or is_secret_name(bare)


# ---------------------------------------------------------------------------- token shapes

#: detect-secrets plugins whose patterns recognise a token by its own shape. The others are
#: left out on purpose: `keyword` and the vendor keyword plugins (cloudant, ibm_*) match
#: `name = value` forms, which the name rules below cover for every name; `basic_auth` and
#: `private_key` match less than the URL and PEM rules here (only the `BEGIN` line of a key);
#: the entropy plugins would blank every sha256 a record holds.
_DETECT_SECRETS_PLUGINS = (
    ("artifactory", "ArtifactoryDetector"),
    ("aws", "AWSKeyDetector"),
    ("azure_storage_key", "AzureStorageKeyDetector"),
    ("discord", "DiscordBotTokenDetector"),
    ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"),
    ("jwt", "JwtTokenDetector"),
    ("mailchimp", "MailchimpDetector"),
    ("npm", "NpmDetector"),
    ("openai", "OpenAIDetector"),
    ("pypi_token", "PypiTokenDetector"),
    ("sendgrid", "SendGridDetector"),
    ("slack", "SlackDetector"),
    ("square_oauth", "SquareOAuthDetector"),
    ("stripe", "StripeDetector"),
    ("telegram_token", "TelegramBotTokenDetector"),
    ("twilio", "TwilioKeyDetector"),
)

#: Shapes detect-secrets has no plugin for, or matches more narrowly than tokens are issued
#: (GitHub fine-grained PATs, Stripe test keys, Slack tokens without a numeric part, Google
#: API keys, `sk-` keys of OpenAI's project and Anthropic's formats).
_OWN_SHAPES = (
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"gh[pousr]_[A-Za-z0-9]{20,}",
    r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
    r"xox[abeoprs]-[A-Za-z0-9-]{10,}",
    r"AIza[0-9A-Za-z_-]{35}",
    r"\bsk-[A-Za-z0-9_-]{20,}",
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",
)


@dataclass(frozen=True)
class _Shape:
    pattern: re.Pattern[str]
    #: the shortest text it can match: shorter texts (most ids) skip it
    min_length: int
    #: a literal every match holds: texts without it skip the pattern ("" when none)
    anchor: str


def _shape_patterns() -> list[tuple[str, int]]:
    """(pattern, flags) of every token shape, detect-secrets' first."""
    shapes: list[tuple[str, int]] = []
    for module, name in _DETECT_SECRETS_PLUGINS:
        plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        shapes += [(p.pattern, p.flags) for p in plugin.denylist]
    shapes += [(pattern, 0) for pattern in _OWN_SHAPES]
    return shapes


def shape_bounds(source: str, flags: int) -> tuple[int, str]:
    """What any match of `source` needs, by the standard library's own parser: its
    shortest length, and the longest literal that stands outside every group, repeat and
    alternative (so every match holds it; "" when there is none or case is ignored). Both
    let a text skip a pattern that cannot match it without running the pattern. (0, "") if
    a later Python moves the parser: no shortcut, the same result."""
    try:
        from re import _constants, _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(source, flags)
        low = int(parsed.getwidth()[0])
        if parsed.state.flags & re.IGNORECASE:
            return low, ""
        best, run = "", ""
        for op, argument in parsed.data:
            if op is _constants.LITERAL:
                run += chr(argument)
                continue
            best, run = max(best, run, key=len), ""
        return low, max(best, run, key=len)
    except Exception:
        return 0, ""


def _compile_shapes() -> tuple[_Shape, ...]:
    # Each pattern searched on its own: one alternation of all of them is several times
    # slower in Python's engine (no literal prefix left to skip ahead with).
    out = []
    for source, flags in _shape_patterns():
        pattern = re.compile(source, flags)
        out.append(_Shape(pattern, *shape_bounds(source, flags)))
    return tuple(sorted(out, key=lambda shape: shape.min_length))


_SHAPES = _compile_shapes()
#: a token runs on over these characters (a pattern that stops early, such as a lazy JWT
#: signature or a fixed-length GitHub token, leaves no tail behind)
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.]*")
#: what some detect-secrets patterns match around the token: kept, not blanked
_DELIMITERS = " \t\r\n=:\"'"


def _blank_shape(match: re.Match[str]) -> tuple[str, int]:
    """The match with its token blanked, and where the blanked span ends: through the
    token's tail, its delimiters kept."""
    text, start, end = match.string, match.start(), match.end()
    # A pattern with a group of its own that captures a long value (AWS secret keys after
    # their name, npm's _authToken): blank only that value and keep its context.
    # Only the token's own run of characters: npm's pattern runs its group to the end of
    # the line, which would blank whatever a one-line JSON document holds after it.
    if match.re.groups and match.group(1) and len(match.group(1)) >= 16:
        run = _TOKEN_TAIL.match(text, match.start(1), match.end(1))
        stop = run.end() if run is not None and run.end() > match.start(1) else match.end(1)
        return f"{text[start : match.start(1)]}{REDACTED}{text[stop:end]}", end
    whole = match.group(0)
    core = whole.strip(_DELIMITERS)
    lead = whole[: len(whole) - len(whole.lstrip(_DELIMITERS))]
    trail = whole[len(lead) + len(core) :]
    if trail:
        return f"{lead}{REDACTED}{trail}", end
    tail = _TOKEN_TAIL.match(text, end)
    stop = tail.end() if tail is not None else end
    while stop > end and text[stop - 1] == ".":
        stop -= 1  # a sentence's full stop is not part of the token
    return f"{lead}{REDACTED}", stop


def _redact_shape(pattern: re.Pattern[str], text: str) -> str:
    out: list[str] = []
    position = 0
    for match in pattern.finditer(text):
        if match.start() < position:
            continue  # inside the tail of a token already blanked
        replaced, end = _blank_shape(match)
        out += (text[position : match.start()], replaced)
        position = end
    if not out:
        return text
    out.append(text[position:])
    return "".join(out)


def _redact_shapes(text: str) -> str:
    length = len(text)
    for shape in _SHAPES:
        if length < shape.min_length:
            break  # the rest are longer still
        if shape.anchor and shape.anchor not in text:
            continue
        text = _redact_shape(shape.pattern, text)
    return text


# ---------------------------------------------------------------------------- context rules

# A value after a name: already redacted, a double-quoted string (escapes honoured), a
# single-quoted one, a string quoted with escaped quotes (JSON inside a JSON string, closed
# by as many backslashes as opened it), a flat object or list, or a bare word.
_VALUE = (
    r"(?P<value>\[REDACTED\]|\"(?:[^\"\\]|\\.)*\"|'[^']*'"
    r"|(?P<bs>\\+)\"(?:[^\"\\]|(?P=bs)\\+\"|\\+(?![\\\"]))*(?P=bs)\""
    r"|\{[^{}]{0,4096}\}|\[[^\[\]]{0,4096}\]"
    r"|[^\s\"',;&|(){}\[\]\\][^\s\"',;&|)}\]\\]*)"
)
_QUOTE = r"\\*[\"']?"
#: white space between the parts of a pair, also as escapes (YAML inside a JSON string)
_GAP = r"(?:\s|\\+[nrt])*"

_Sub = tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]


def _split_quotes(value: str, escape: str | None) -> tuple[str, str, str]:
    """(opening quote, content, closing quote) of a value as `_VALUE` matched it; `escape`
    is the run of backslashes before an escaped quote (JSON inside a JSON string)."""
    if escape:
        quote = escape + '"'
        return quote, value[len(quote) : -len(quote)], quote
    if value[:1] in ("'", '"') and len(value) >= 2:
        return value[0], value[1:-1], value[-1]
    return "", value, ""


def _assigned(match: re.Match[str], secret: bool) -> str:
    value = match.group("value")
    opening, content, closing = _split_quotes(value, match.group("bs"))
    head = match.group(0)[: match.start("value") - match.start()]
    if secret:
        return f"{head}{opening}{REDACTED}{closing}"
    if value[:1] in ("{", "[") and _has_any(value.lower(), _CONTEXT_WORDS):
        # a flat object or list under an ordinary name: its own names decide
        return f"{head}{_redact_context(value)}"
    if opening and _has_any(content.lower(), _CONTEXT_WORDS):
        # Not a secret's name, but its quoted value may hold assignments of its own (an
        # `export X_TOKEN=...` in a command string, JSON inside a JSON string): look inside.
        return f"{head}{opening}{_redact_context(content)}{closing}"
    return match.group(0)


def _by_name(match: re.Match[str]) -> str:
    return _assigned(match, _text_secret_name(match.group("name")))


def _by_pair(match: re.Match[str]) -> str:
    return _assigned(match, _text_secret_name(match.group("pname")))


def _keep_scheme(match: re.Match[str]) -> str:
    scheme = match.group("scheme")
    return f"{match.group('name')}{match.group('sep')}{scheme + ' ' if scheme else ''}{REDACTED}"


# Order matters: whole blocks and headers first, so the generic `NAME=value` rule later
# does not stop at the first word of a header value and leave the token behind it.
_BLOCKS: tuple[_Sub, ...] = (
    # PEM private keys; an unterminated block (cut by a cap) is blanked to the end, or to
    # the end of the JSON string it is in (a key's base64 never holds a quote).
    (
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[^\"\\]|\\(?!\\*\"))*?"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?=\\*\")|\Z)"
        ),
        f"-----BEGIN PRIVATE KEY-----{REDACTED}-----END PRIVATE KEY-----",
    ),
    # Authorization headers: keep the scheme, drop the credential.
    (
        re.compile(
            r"(?i)(?P<name>\b(?:proxy-)?authorization)(?P<sep>\\*[\"']?\s*[:=]\s*\\*[\"']?)"
            r"(?:(?P<scheme>bearer|basic|token|digest|negotiate)\s+)?(?P<cred>[^\s\"',;\\]+)"
        ),
        _keep_scheme,
    ),
    (re.compile(r"(?i)\b(?P<scheme>bearer)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\g<scheme> {REDACTED}"),
    # Credentials inside URLs: scheme://user:password@host, and a long user name alone
    # (a token given as the user: https://<token>@host).
    (
        re.compile(
            r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]{0,31}://[^\s/@:]{0,256}:)[^\s/@]{1,512}(?P<at>@)"
        ),
        rf"\g<head>{REDACTED}\g<at>",
    ),
    (
        re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]{0,31}://)[^\s/@:\[\]]{20,256}(?P<at>@)"),
        rf"\g<head>{REDACTED}\g<at>",
    ),
)

_CONTEXT: tuple[_Sub, ...] = (
    # {"name": "DB_PASSWORD", "value": "..."} and its YAML form (name: X / value: ...).
    (
        re.compile(
            rf"(?i)(?<![\w.-]){_QUOTE}(?:name|key){_QUOTE}\s*[:=]\s*{_QUOTE}"
            rf"(?P<pname>[\w.-]{{1,256}}){_QUOTE}{_GAP}(?:[,;]{_GAP})?{_QUOTE}value{_QUOTE}\s*[:=]\s*"
            + _VALUE
        ),
        _by_pair,
    ),
    # Command-line flags: --password hunter2, --api-key=xyz, and in a JSON argv list
    # "--token", "xyz"
    (
        re.compile(r"(?P<name>(?<![\w-])--?[\w.-]+)(?P<sep>=|\s+|\\*[\"']\s*,\s*)(?!-)" + _VALUE),
        _by_name,
    ),
    # NAME=value, NAME: value, "name": "value", with a secret-looking name.
    (
        re.compile(rf"(?P<name>(?<![\w.-])[\w.-]+{_QUOTE})(?P<sep>\s*[:=]\s*)" + _VALUE),
        _by_name,
    ),
)

# Every block and context rule needs one of these somewhere in the text, in any case (the
# assignment rules need a secret-looking name, so its keywords stand in for them; a quoted
# value is only looked into for them). Most strings in a record (ids, hashes, paths,
# times, outcomes) have none, and a few substring tests are far cheaper than the rules.
_CONTEXT_WORDS = (
    "pass", "pw", "secret", "token", "key", "private", "credential", "session", "cookie",
    "auth",
)  # fmt: skip
_BLOCK_WORDS = ("auth", "bearer", "://", "-----begin")


def _has_any(lowered: str, words: tuple[str, ...]) -> bool:
    return any(word in lowered for word in words)


_CACHED_LENGTH = 256


def _apply(subs: tuple[_Sub, ...], text: str) -> str:
    for pattern, replacement in subs:
        text = pattern.sub(replacement, text)
    return text


def _redact_context(text: str) -> str:
    return _apply(_CONTEXT, text)


def redact(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED]`: the one function for
    free text and URLs (`https://user:[REDACTED]@host`), wherever the worker stores or
    serves text."""
    if len(text) <= _CACHED_LENGTH:
        return _redact_short(text)
    return _redact(text)


def _redact(text: str) -> str:
    lowered = text.lower()
    if _has_any(lowered, _BLOCK_WORDS):
        text = _apply(_BLOCKS, text)
    text = _redact_shapes(text)
    if _has_any(lowered, _CONTEXT_WORDS):
        text = _redact_context(text)
    return text


# Commands, paths and limits repeat from record to record; remembering short results
# saves the patterns on almost every hook record.
_redact_short = functools.lru_cache(maxsize=4096)(_redact)


# ---------------------------------------------------------------------------- JSON data

_PAIR_NAME_KEYS = frozenset({"name", "key", "Name", "Key", "NAME", "KEY"})
_PAIR_VALUE_KEYS = ("value", "Value", "VALUE")


def secret_keys(mapping: dict[str, Any]) -> set[str]:
    """The keys of `mapping` whose values are secrets: secret names, and the `value` of a
    `{"name": "DB_PASSWORD", "value": ...}` pair."""
    out = {key for key in mapping if type(key) is str and is_secret_name(key)}
    if not _PAIR_NAME_KEYS.isdisjoint(mapping):
        for name_key in _PAIR_NAME_KEYS.intersection(mapping):
            named = mapping[name_key]
            if type(named) is str and is_secret_name(named):
                out.update(key for key in _PAIR_VALUE_KEYS if key in mapping)
    return out


def blank(value: Any) -> Any:
    """What a secret's value becomes: `[REDACTED]`, keeping null and empty values (they
    hold nothing, and say that nothing was set)."""
    if value is None or value == "" or value == [] or value == {}:
        return value
    return REDACTED


def secret_flag_values(items: list[Any]) -> set[int]:
    """Indexes of `items` (an argv list) that follow a flag with a secret's name:
    `["--password", "x"]`."""
    out: set[int] = set()
    for index, item in enumerate(items[:-1]):
        if (
            type(item) is str
            and item[:1] == "-"
            and "=" not in item
            and type(items[index + 1]) is str
            and _text_secret_name(item.lstrip("-"))
        ):
            out.add(index + 1)
    return out


def redact_value(value: Any) -> Any:
    """JSON data with every secret redacted: strings by `redact`, and the values of keys
    named like secrets (`is_secret_name`), at any depth."""
    kind = type(value)
    if kind is str:
        return redact(value)
    if kind is dict:
        secret = secret_keys(value)
        return {
            key: blank(item) if key in secret else redact_value(item) for key, item in value.items()
        }
    if kind is list:
        flagged = secret_flag_values(value)
        return [
            blank(item) if index in flagged else redact_value(item)
            for index, item in enumerate(value)
        ]
    return value


# ---------------------------------------------------------------------------- excerpts


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
