"""`cloudrunner health`'s line when the daemon's version is not the client's (the same
words as client/internal/health/health.go: its health_test.go checks those with the same bodies)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.commands.health import version_mismatch
from cloudrunner.version import VERSION

ADVICE = "; use one version of both (cloudrunner --version, cloudrunner-hook --version)"
SILENT = (
    f"cloudrunner: the daemon does not say its version (it is older than this client, {VERSION})"
)


def test_the_same_version_says_nothing() -> None:
    body = json.dumps({"status": "ok", "version": VERSION, "commit": "0123456789ab"})
    assert version_mismatch(body.encode()) is None


def test_another_version_is_one_line_naming_both() -> None:
    body = json.dumps({"status": "ok", "version": "99.0.0", "commit": "0123456789ab+dirty"})
    assert version_mismatch(body.encode()) == (
        f"cloudrunner: the daemon is version 99.0.0 (commit 0123456789ab+dirty) and this "
        f"client {VERSION}{ADVICE}"
    )


@pytest.mark.parametrize(
    "body",
    [b'{"status":"ok"}', b'{"version":7}', b'["version"]', b"not json", b"\xff\xfe",
     b'{"version":"0.2.0\\u001b[2J"}', b'{"version":"' + b"9" * 65 + b'"}',
     b'{"version":""}', b"[" * 100_000],
)  # fmt: skip
def test_a_daemon_that_does_not_say_a_plain_version_is_named_as_older(body: bytes) -> None:
    assert version_mismatch(body) == SILENT + ADVICE


def test_a_hostile_commit_is_not_repeated() -> None:
    body = json.dumps({"version": "99.0.0", "commit": "abc\nfake line"}).encode()
    line = version_mismatch(body)
    assert line is not None and "(commit unknown)" in line and "\n" not in line


@given(st.dictionaries(st.sampled_from(["status", "version", "commit"]),
                       st.one_of(st.text(max_size=70), st.integers(), st.none())))  # fmt: skip
def test_whatever_the_daemon_says_the_answer_is_at_most_one_printable_line(
    data: dict[str, object],
) -> None:
    line = version_mismatch(json.dumps(data).encode())
    if line is not None:
        assert (line.isprintable() and line.isascii()) or VERSION not in line
        assert "\n" not in line and "\r" not in line
