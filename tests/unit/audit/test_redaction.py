"""Secret redaction and capped excerpts (cloudrunner/audit/redaction.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.audit import redaction
from cloudrunner.audit.redaction import REDACTED, excerpt, redact

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
