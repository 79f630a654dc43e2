"""The daemon's bearer token file: what `cloudrunner serve --listen` accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.client import bearer_token_ok
from cloudrunner.commands.serve import ServeError, read_token

GOOD = "0123456789abcdef0123456789abcdef"


def test_a_long_visible_token_is_read_without_its_surrounding_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(f"  {GOOD}\n")
    assert read_token(path) == GOOD


@pytest.mark.parametrize(
    "token",
    [f"{GOOD}\r\nX-Injected: 1", f"{GOOD} {GOOD}", f"{GOOD}\u00e9", f"{GOOD}\x00", f"{GOOD}\x7f"],
)
def test_a_token_no_client_could_send_is_refused_at_start(tmp_path: Path, token: str) -> None:
    path = tmp_path / "token"
    path.write_text(token, encoding="utf-8")
    with pytest.raises(ServeError, match="holds a character a bearer token cannot carry"):
        read_token(path)


@given(st.text(max_size=40))
def test_a_token_is_good_exactly_when_each_character_is_visible_ascii(token: str) -> None:
    assert bearer_token_ok(token) == all(33 <= ord(ch) <= 126 for ch in token)
    if bearer_token_ok(token):
        # what the Python client sends: it must encode as a header value
        f"Authorization: Bearer {token}".encode("latin-1")
