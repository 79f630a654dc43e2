"""The per-event client's transport parts: endpoints, policy answers, its event table."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudrunner import client
from cloudrunner.protocol.events import EVENTS, Decision, event_spec, neutral_answer


def test_the_blocking_table_matches_the_protocol_core() -> None:
    expected = {
        name: (spec.decision.value, spec.message_field())
        for name, spec in EVENTS.items()
        if spec.decision is not Decision.NONE
    }
    assert expected == client.BLOCKING_EVENTS


@pytest.mark.parametrize("event", sorted(EVENTS))
def test_neutral_answers_match_the_protocol_core(event: str) -> None:
    assert client.neutral_answer(event) == neutral_answer(event)


@pytest.mark.parametrize("event", sorted(EVENTS))
def test_a_fail_closed_answer_blocks_where_the_event_can(event: str) -> None:
    answer = client.blocked_answer(event, "the daemon is down")
    assert client.blocks(answer) == event_spec(event).can_block
    field = event_spec(event).message_field()
    if event_spec(event).can_block and field:
        assert answer[field] == "the daemon is down"


def test_the_endpoint_comes_from_flags_then_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("CLOUDRUNNER_SOCKET", "CLOUDRUNNER_URL", "CLOUDRUNNER_STATE_DIR",
                 "CLOUDRUNNER_TOKEN_FILE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    assert client.endpoint_from(None, None, None).socket_path == (
        "/var/lib/cloudrunner/cloudrunner.sock"
    )
    monkeypatch.setenv("CLOUDRUNNER_STATE_DIR", "/srv/state")
    assert client.endpoint_from(None, None, None).socket_path == "/srv/state/cloudrunner.sock"
    monkeypatch.setenv("CLOUDRUNNER_SOCKET", "/run/cr.sock")
    assert client.endpoint_from(None, None, None).socket_path == "/run/cr.sock"
    assert client.endpoint_from("/flag.sock", None, None).socket_path == "/flag.sock"
    token = tmp_path / "token"
    token.write_text("abc\n")
    monkeypatch.setenv("CLOUDRUNNER_URL", "http://10.1.2.3:8765")
    monkeypatch.setenv("CLOUDRUNNER_TOKEN_FILE", str(token))
    tcp = client.endpoint_from(None, None, None)
    assert (tcp.socket_path, tcp.host, tcp.port, tcp.token) == (None, "10.1.2.3", 8765, "abc")
    # an explicit --socket wins over CLOUDRUNNER_URL
    assert client.endpoint_from("/flag.sock", None, None).socket_path == "/flag.sock"


@pytest.mark.parametrize("url", ["https://h:1", "h:1", "http://", "http://h:99999"])
def test_a_bad_url_is_a_usage_error(url: str) -> None:
    with pytest.raises(client.UsageError, match="--url"):
        client.endpoint_from(None, url, None)


def test_a_missing_token_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(client.UsageError, match="cannot read the token file"):
        client.endpoint_from(None, "http://h:1", str(tmp_path / "none"))
