"""Secret redaction and capped excerpts (cloudrunner/audit/redaction.py)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudrunner.audit import redaction
from cloudrunner.audit.redaction import REDACTED, excerpt, is_secret_name, redact, redact_value

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5" * 4
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAxyz\nQWERTYsecretbody\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("export GITHUB_TOKEN=s3cr3tvalue", "s3cr3tvalue"),
        ("password=hunter2 next", "hunter2"),
        ("DB_PASSWORD: 'correct horse'", "correct horse"),
        ('{"api_key": "k-123456", "user": "bob"}', "k-123456"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI/K7MDENG"),
        ("curl -H 'Authorization: Bearer abc.def.ghi123' https://x", "abc.def.ghi123"),
        ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("sending bearer eyJraWQiOiJ4In0abcdef to server", "eyJraWQiOiJ4In0abcdef"),
        (f"token is {GITHUB_TOKEN}.", GITHUB_TOKEN),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG0123456789"),
        (f"key id {AWS_KEY_ID} in config", AWS_KEY_ID),
        ("git clone https://x-access-token:tok3n@github.com/o/r.git", "tok3n"),
        ("mysql --password hunter2 -u root", "hunter2"),
        ("tool --api-key=abcdef0123", "abcdef0123"),
        ("SESSION_ID=deadbeefcafe", "deadbeefcafe"),
        ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890"),
        ("stripe sk_live_0123456789abcdefXYZ", "sk_live_0123456789abcdefXYZ"),
    ],
)
def test_secrets_are_redacted(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert REDACTED in out


def test_private_key_block_is_blanked_whole() -> None:
    out = redact(f"before\n{PRIVATE_KEY}\nafter")
    assert "QWERTYsecretbody" not in out
    assert out.startswith("before\n") and out.endswith("\nafter")


def test_private_key_cut_short_is_blanked_to_the_end() -> None:
    out = redact("key: -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk")
    assert "b3BlbnNzaC1rZXk" not in out


@pytest.mark.parametrize(
    "text",
    [
        "PWD=/home/hook AUTHOR=ada x=1",
        "sha256=" + "ab" * 32,
        "ls -la /tmp && echo done",
        "exit code 2: blocked by guard.sh",
        "https://github.com/org/repo.git",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact(text) == text


@given(
    st.text(max_size=200),
    st.sampled_from(
        [
            "password=x1",
            GITHUB_TOKEN,
            "Authorization: Bearer zzzzzzzzzzzz",
            '"secret": "q"',
            PRIVATE_KEY,
            "https://u:p4ss@h/",
        ]
    ),
    st.text(max_size=200),
)
def test_redaction_is_idempotent(before: str, secret: str, after: str) -> None:
    once = redact(before + " " + secret + " " + after)
    assert redact(once) == once


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=12, max_size=40))
def test_a_secret_value_never_survives_in_assignments(value: str) -> None:
    for template in ("API_TOKEN={}", "password: {}", "--secret {}", '"client_secret":"{}"'):
        assert value not in redact("x " + template.format(value) + " y")


def test_long_words_are_redacted_in_linear_time() -> None:
    # A quadratic pattern would not finish this within the test run at all.
    assert redact("token" * 100_000 + "=v") == "token" * 100_000 + "=" + REDACTED


def test_excerpt_keeps_short_output_whole() -> None:
    assert excerpt(b'{"permission": "allow"}\n', 100) == '{"permission": "allow"}\n'


def test_excerpt_caps_and_says_how_much_there_was() -> None:
    out = excerpt(b"a" * 5000, 100)
    assert out.startswith("a" * 100 + "…")
    assert "5000 bytes in total" in out
    assert "a" * 101 not in out


def test_excerpt_redacts_a_secret_straddling_the_cap() -> None:
    data = b"x" * 90 + b" GITHUB_TOKEN=" + GITHUB_TOKEN.encode() + b" tail"
    out = excerpt(data, 100)
    assert "ghp_" not in out
    assert GITHUB_TOKEN[:6] not in out


def test_excerpt_replaces_invalid_utf8() -> None:
    assert excerpt(b"ok \xff\xfe done", 50) == "ok \ufffd\ufffd done"


def test_excerpt_rejects_a_negative_cap() -> None:
    with pytest.raises(ValueError, match="cap"):
        excerpt(b"x", -1)


def _every_substitution(text: str) -> str:
    text = redaction._apply(redaction._BLOCKS, text)
    text = redaction._redact_shapes(text)
    return redaction._apply(redaction._CONTEXT, text)


@given(
    st.lists(
        st.sampled_from(
            [
                "x",
                " ",
                "=",
                ":",
                '"',
                "--",
                "Token",
                "PASSWORD",
                "api-key",
                "Authorization",
                "bearer ",
                "https://",
                "u:p@",
                "AKIA",
                "ghp_",
                "eyJ",
                "-----BEGIN RSA PRIVATE KEY-----",
                "0123456789abcdefghij",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_the_fast_path_never_skips_a_secret(text: str) -> None:
    # redact() skips texts without a trigger keyword; it must agree with running everything.
    assert redact(text) == _every_substitution(text)


# -- the corpus of secret shapes (tests/data/secret_shapes.toml) -------------------------

CORPUS_PATH = Path(__file__).resolve().parents[2] / "data" / "secret_shapes.toml"
CORPUS = tomllib.loads(CORPUS_PATH.read_text())
SHAPES = [
    pytest.param(entry["text"], entry["secret"], id=entry["name"]) for entry in CORPUS["shape"]
]


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_every_corpus_shape_is_redacted(text: str, secret: str) -> None:
    assert secret in text  # the corpus itself is consistent
    out = redact(text)
    assert secret not in out
    assert REDACTED in out
    assert redact(out) == out


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_every_corpus_shape_is_redacted_inside_json_and_json_in_json(
    text: str, secret: str
) -> None:
    # a hook that prints its input, or a log line carrying a JSON document as a string
    once = json.dumps({"tool_input": {"command": text}, "cwd": "/w"})
    twice = json.dumps({"message": once})
    for form in (once, twice, json.dumps(once), f"stderr: {once} (exit 2)"):
        assert secret not in redact(form), form


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_every_corpus_shape_is_redacted_in_an_excerpt(text: str, secret: str) -> None:
    data = ("log line\n" * 20 + text + "\n" + "more\n" * 20).encode()
    assert secret not in excerpt(data, 4096)
    assert secret[:12] not in excerpt(data, len(data) - 100 - len(text) // 2)


def test_structured_corpus_is_redacted_by_key_name_and_keeps_the_rest() -> None:
    structured = CORPUS["structured"]
    out = json.dumps(redact_value({"tool_input": structured["tool_input"]}))
    for secret in structured["secrets"]:
        assert secret not in out
    for kept in structured["kept"]:
        assert json.dumps(kept) in out


# -- names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "password", "Password", "passwd", "DB_PASSWORD", "db-password", "dbPassword",
        "secret", "client_secret", "AWS_SECRET_ACCESS_KEY", "token", "accessToken",
        "GITHUB_TOKEN", "id_token", "api_key", "apikey", "apiKey", "X-Api-Key", "x-api-key",
        "authorization", "Proxy-Authorization", "cookie", "Set-Cookie", "private_key",
        "privateKey", "credentials", "credential", "STRIPE_KEY", "signing_key", "DB_PASS",
        "auth", "secrets", "passphrase",
    ],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


def test_long_names_are_judged_too_but_not_remembered() -> None:
    before = redaction._secret_name_cached.cache_info().currsize
    assert is_secret_name("x" * 300 + "_token")
    assert not is_secret_name("x" * 300 + "_tokens")
    assert redaction._secret_name_cached.cache_info().currsize == before


@pytest.mark.parametrize(
    "name",
    [
        "command", "cwd", "session_id", "conversation_id", "tokens", "context_tokens",
        "max_tokens", "author", "key", "keys", "hook_event_name", "tool_name", "name",
        "value", "PWD", "path", "monkey", "keyboard", "source_hash", "file_path", "model",
    ],
)  # fmt: skip
def test_protocol_and_ordinary_names_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_values_of_secret_keys_are_blanked_at_any_depth() -> None:
    data = {
        "tool_input": {
            "a": [{"b": {"Password": "p1", "n": 3}}],
            "apiKey": 12345,
            "token": None,
            "secret": "",
            "credentials": {"user": "u", "pass": "p2"},
        }
    }
    out = redact_value(data)["tool_input"]
    assert out["a"] == [{"b": {"Password": REDACTED, "n": 3}}]
    assert out["apiKey"] == REDACTED  # numbers too: a PIN is a number
    assert out["token"] is None and out["secret"] == ""  # nothing set, nothing to hide
    assert out["credentials"] == REDACTED


@pytest.mark.parametrize(
    ("pair", "blanked"),
    [
        ({"name": "DB_PASSWORD", "value": "x1"}, True),
        ({"Name": "api-key", "Value": "x1"}, True),
        ({"key": "GITHUB_TOKEN", "value": "x1"}, True),
        ({"name": "MODE", "value": "x1"}, False),
        ({"name": 5, "value": "x1"}, False),
    ],
)
def test_name_value_pairs(pair: dict[str, Any], blanked: bool) -> None:
    out = redact_value(pair)
    value_key = "Value" if "Value" in pair else "value"
    assert (out[value_key] == REDACTED) is blanked
    assert {k: v for k, v in out.items() if k != value_key} == {
        k: v for k, v in pair.items() if k != value_key
    }


def test_argv_lists_blank_the_value_after_a_secret_flag() -> None:
    argv = ["deploy", "--token", "t0k", "--region", "eu", "-p", "x", "--password=inline1"]
    out = redact_value(argv)
    assert out == ["deploy", "--token", REDACTED, "--region", "eu", "-p", "x",
                   f"--password={REDACTED}"]  # fmt: skip


def test_a_quoted_value_of_an_ordinary_name_is_looked_into() -> None:
    # The old rule took `"command": "..."` as one assignment and skipped its inside.
    text = '{"command": "export AWS_SECRET_ACCESS_KEY=abc123def && ls", "cwd": "/w"}'
    out = redact(text)
    assert "abc123def" not in out
    assert out == (f'{{"command": "export AWS_SECRET_ACCESS_KEY={REDACTED} && ls", "cwd": "/w"}}')


def test_escaped_json_inside_a_json_string() -> None:
    inner = json.dumps({"password": "hunter22", "user": "ada"})
    out = redact(json.dumps({"body": inner}))
    assert "hunter22" not in out
    assert json.loads(json.loads(out)["body"]) == {"password": REDACTED, "user": "ada"}


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("https://git@github.com/o/r.git", "git@github.com"),
        ("ssh://deploy@host.example.invalid/x", "deploy@"),
        ("mail me at dev@example.invalid", "dev@example.invalid"),
    ],
)
def test_short_url_user_names_are_kept(text: str, kept: str) -> None:
    assert kept in redact(text)


def test_a_long_url_user_name_is_a_token() -> None:
    out = redact("https://0123456789abcdef0123456789abcdef@git.example.invalid/o/r")
    assert out == f"https://{REDACTED}@git.example.invalid/o/r"


# -- the shapes come from detect-secrets, searched with sound shortcuts -------------------


def test_shapes_include_detect_secrets_plugins() -> None:
    from detect_secrets.plugins.github_token import GitHubTokenDetector

    sources = {shape.pattern.pattern for shape in redaction._SHAPES}
    assert {p.pattern for p in GitHubTokenDetector.denylist} <= sources


@pytest.mark.parametrize(
    ("pattern", "flags", "bounds"),
    [
        (r"[0-9a-z]{32}-us[0-9]{1,2}", 0, (36, "-us")),
        (r"(?:\s|=|:|\"|^)AKC[a-zA-Z0-9]{10,}(?:\s|\"|$)", 0, (13, "AKC")),
        (r"(ab|cd)x", 0, (3, "x")),
        (r"abc", re.IGNORECASE, (3, "")),
        (r"(?i)abc", 0, (3, "")),
        (r"a?bc*", 0, (1, "b")),
    ],
)
def test_shape_bounds(pattern: str, flags: int, bounds: tuple[int, str]) -> None:
    assert redaction.shape_bounds(pattern, flags) == bounds


@given(st.text(alphabet='aAkKcC-us0123456789=: "x', max_size=60))
def test_the_shape_shortcuts_never_skip_a_match(text: str) -> None:
    for shape in redaction._SHAPES:
        if shape.pattern.search(text):
            assert len(text) >= shape.min_length
            assert shape.anchor in text


@pytest.mark.parametrize(
    "text",
    [
        # npm's pattern runs to the end of the line; only the token goes
        '{"a": "//r.example.invalid/:_authToken=npm_FAKEfake0123456789FAKEfake0123456789", '
        '"b": "keep me"}',
        # a key block cut short inside a JSON string ends with that string
        json.dumps({"a": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1", "b": "keep me"}),
        json.dumps(json.dumps({"a": "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE", "b": "keep me"})),
        # a flat object under a secret name goes whole, one under an ordinary name is read
        '{"credentials": {"user": "u1", "pass": "p1"}, "b": "keep me"}',
    ],
)
def test_redaction_stops_where_the_secret_ends(text: str) -> None:
    out = redact(text)
    assert "keep me" in out and REDACTED in out
    assert "p1" not in out and "FAKEfake" not in out and "b3Bl" not in out


def test_ordinary_names_with_object_values_are_read() -> None:
    out = redact('{"env": {"DB_PASSWORD": "p9", "MODE": "prod"}}')
    assert out == f'{{"env": {{"DB_PASSWORD": "{REDACTED}", "MODE": "prod"}}}}'


# -- properties: a secret under a secret's name never survives, in data or as JSON text ---

_SECRET_KEYS = st.sampled_from(
    ["password", "DB_PASSWORD", "apiKey", "x-api-key", "client_secret", "GITHUB_TOKEN",
     "Authorization", "cookie", "private_key", "credentials", "AWS_SECRET_ACCESS_KEY"]
)  # fmt: skip
_ORDINARY_KEYS = st.sampled_from(["command", "cwd", "env", "tool_input", "args", "x", "name"])
_SECRET_VALUES = st.text(
    alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz", min_size=14, max_size=30
)
# (no letters, so an ordinary value never happens to spell the secret)
_ORDINARY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(alphabet="0123456789 -_./:=\"'{}[],\\\n", max_size=20),
)


def _with_secret(secret_key: str, secret: str) -> st.SearchStrategy[Any]:
    """JSON data holding `{secret_key: secret}` somewhere among ordinary data."""
    planted = st.just({secret_key: secret})
    return st.recursive(
        planted | _ORDINARY,
        lambda inner: (
            st.lists(inner, max_size=3).map(lambda items: [*items])
            | st.dictionaries(_ORDINARY_KEYS, inner, max_size=3)
        ),
        max_leaves=8,
    ).map(lambda data: {"tool_input": data, "planted": {secret_key: secret}})


@settings(max_examples=200, deadline=None)
@given(st.data(), _SECRET_KEYS, _SECRET_VALUES)
def test_a_secret_keys_value_never_survives_in_data_or_in_json_text(
    data: st.DataObject, secret_key: str, secret: str
) -> None:
    document = data.draw(_with_secret(secret_key, secret))
    assert secret not in json.dumps(redact_value(document))
    # the same document printed by a hook: compact, indented, and as a JSON string
    for text in (
        json.dumps(document),
        json.dumps(document, separators=(",", ":")),
        json.dumps(document, indent=2),
        json.dumps(json.dumps(document)),
    ):
        assert secret not in redact(text), text
