"""The per-event client's transport parts: endpoints, policy answers, its event table."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner import client
from cloudrunner.client import no_daemon as client_fallback
from cloudrunner.protocol import event_names
from cloudrunner.protocol.events import EVENTS, Decision, event_spec, neutral_answer
from cloudrunner.refusals import ErrorCode


def test_the_blocking_table_matches_the_protocol_core() -> None:
    expected = {
        name: (spec.decision.value, spec.message_field())
        for name, spec in EVENTS.items()
        if spec.decision is not Decision.NONE
    }
    assert expected == client.BLOCKING_EVENTS


GO_EVENTS = Path(__file__).parents[3] / "client" / "internal" / "events" / "events.go"
GO_TABLE_START = "var blocking = map[string][2]string{"
GO_TABLE_LINE = re.compile(r'\t"([A-Za-z0-9]+)": +\{"([a-z]+)", "([a-z_]*)"\},')


def go_blocking_table(source: str) -> dict[str, tuple[str, str | None]]:
    """The compiled client's table of blocking events, read from its Go source: every line
    between the map's opening and its closing brace must be one entry (a line in any other
    shape fails, so the check cannot pass on a table it did not read)."""
    start = source.index(GO_TABLE_START) + len(GO_TABLE_START)
    body = source[start : source.index("\n}\n", start)]
    table: dict[str, tuple[str, str | None]] = {}
    for line in body.strip("\n").split("\n"):
        entry = GO_TABLE_LINE.fullmatch(line)
        if entry is None:
            raise ValueError(f"{GO_EVENTS.name}: cannot read the table line {line!r}")
        name, decision, field = entry.groups()
        if name in table:
            raise ValueError(f"{GO_EVENTS.name}: {name} is in the table twice")
        table[name] = (decision, field or None)
    return table


def test_the_compiled_clients_blocking_table_matches_the_protocol_core() -> None:
    """The Go client's events table (client/internal/events) is checked against the Python
    side's event names (cloudrunner/protocol/event_names.py) and definitions here rather
    than generated from them: the names module is the one definition, the Go table stays
    plain source the Go build needs nothing to make, and this test fails on any drift (a
    name, a decision field, a message field)."""
    expected = {
        name: (spec.decision.value, spec.message_field())
        for name, spec in EVENTS.items()
        if spec.decision is not Decision.NONE
    }
    assert go_blocking_table(GO_EVENTS.read_text()) == expected
    assert go_blocking_table(GO_EVENTS.read_text()) == event_names.BLOCKING_EVENTS


@pytest.mark.parametrize(
    "line",
    [
        '\t"preToolUse":   {"permission", "agent_message"}, // a comment',
        '\t"preToolUse": {"permission"},',
        '\t"pre-tool": {"permission", ""},',
        "\t// a comment line",
        '\t"preToolUse": {"agent_message", "permission"},',
    ],
)
def test_a_go_table_line_in_another_shape_fails_the_check(line: str) -> None:
    source = GO_EVENTS.read_text().replace(GO_TABLE_START, GO_TABLE_START + "\n" + line)
    with pytest.raises(ValueError, match="cannot read the table line"):
        go_blocking_table(source)


def test_a_go_table_naming_an_event_twice_fails_the_check() -> None:
    source = GO_EVENTS.read_text().replace(
        GO_TABLE_START,
        GO_TABLE_START + '\n\t"stop": {"permission", ""},\n\t"stop": {"continue", ""},',
    )
    with pytest.raises(ValueError, match="stop is in the table twice"):
        go_blocking_table(source)


def test_both_clients_name_the_draining_code_of_the_table() -> None:
    assert client.DRAINING_CODE == ErrorCode.DRAINING
    assert f'const DrainingCode = "{ErrorCode.DRAINING}"' in GO_EVENTS.read_text()


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


# --------------------------------------------------------------------------- fail policy, spool


def test_the_run_directory_is_the_sockets_or_the_state_dir_for_tcp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CLOUDRUNNER_STATE_DIR", raising=False)
    cases = {"/var/lib/cr/cloudrunner.sock": "/var/lib/cr", "/x.sock": "/", "x.sock": ".",
             "a/b.sock": "a"}  # fmt: skip
    for socket_path, expected in cases.items():
        assert client_fallback.run_dir(client.Endpoint(socket_path)) == expected
    tcp = client.Endpoint(None, "h", 1)
    assert client_fallback.run_dir(tcp) is None
    monkeypatch.setenv("CLOUDRUNNER_STATE_DIR", "/srv/state/")
    assert client_fallback.run_dir(tcp) == "/srv/state"


NOT_A_LIST = "fail_closed_events is not a list of event names"
POLICY = {"version": 1, "daemon": "w1", "fail_closed_events": ["preToolUse"], "extra": [1]}


def test_the_policy_decides_after_the_flags_and_the_variable(tmp_path: Path) -> None:
    directory = str(tmp_path)
    none = client_fallback.decide("preToolUse", None, None, directory)
    assert (none.closed, none.decided_by) == (False, "no-policy")
    assert none.notes == [
        f"cloudrunner: no fail policy was published at {tmp_path}/fail-policy.json; failing open"
    ]
    (tmp_path / "fail-policy.json").write_text(json.dumps(POLICY))
    listed = client_fallback.decide("preToolUse", None, None, directory)
    assert (listed.closed, listed.decided_by, listed.policy_daemon) == (True, "policy", "w1")
    assert client_fallback.decide("stop", None, None, directory).closed is False
    assert client_fallback.decide("preToolUse", False, True, directory).decided_by == "flag"
    env = client_fallback.decide("preToolUse", None, False, directory)
    assert (env.closed, env.decided_by) == (False, "env")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{oops", "not valid JSON"),
        ("[1]", "not a JSON object"),
        ('{"version": 2, "fail_closed_events": []}', "version is not 1"),
        ('{"version": true, "fail_closed_events": []}', "version is not 1"),
        ('{"version": 1}', "fail_closed_events is not a list of event names"),
        (
            '{"version": 1, "fail_closed_events": [null]}',
            "fail_closed_events is not a list of event names",
        ),
        ("\xff", "not valid JSON"),
    ],
)
def test_an_unusable_policy_is_said_with_its_path_and_fails_open(
    tmp_path: Path, text: str, why: str
) -> None:
    (tmp_path / "fail-policy.json").write_bytes(text.encode("latin-1"))
    decision = client_fallback.decide("preToolUse", None, None, str(tmp_path))
    assert (decision.closed, decision.decided_by) == (False, "no-policy")
    assert decision.notes == [
        f"cloudrunner: the fail policy {tmp_path}/fail-policy.json is not usable ({why}); "
        "failing open"
    ]


@given(payload=st.binary(max_size=300), problem=st.text(max_size=6000))
def test_a_spool_line_is_one_json_object_under_4096_bytes(payload: bytes, problem: str) -> None:
    decision = client_fallback.Decision(True, "env")
    answer = client.blocked_answer("preToolUse", "blocked: " + problem)
    line = client_fallback.spool_line("preToolUse", answer, True, problem, decision, payload)
    assert len(line) <= 4096 and line.endswith(b"\n") and line.count(b"\n") == 1
    record = json.loads(line)
    assert record["payload_sha256"] == hashlib.sha256(payload).hexdigest()
    assert (record["outcome"], record["client"], record["decided_by"]) == (
        "blocked", "cloudrunner hook", "env"
    )  # fmt: skip


def test_the_spool_is_bounded_and_says_what_it_could_not_record(tmp_path: Path) -> None:
    line = b"x" * 1000 + b"\n"
    assert client_fallback.append_spool(str(tmp_path), line) is None
    spool = tmp_path / "fallback.spool"
    assert spool.stat().st_mode & 0o777 == 0o600
    with spool.open("ab") as handle:
        handle.truncate(1024 * 1024 - 500)
    assert client_fallback.append_spool(str(tmp_path), line) == (
        f"cloudrunner: the fallback spool {spool} is full (1 MiB); this event is not recorded"
    )
    assert spool.stat().st_size == 1024 * 1024 - 500
    gone = client_fallback.append_spool(str(tmp_path / "gone"), line)
    assert gone is not None and "(no such file or directory); this event is not recorded" in gone
    assert "CLOUDRUNNER_STATE_DIR" in (client_fallback.append_spool(None, line) or "")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"", "closed without an answer"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", "closed without an answer"),
        (b"SSH-2.0-x\r\n", "does not speak HTTP"),
        (b"HTTP/1.1 abc\r\n\r\n", "does not speak HTTP"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}", "the answer was cut short"),
    ],
)
def test_an_answer_that_is_not_whole_http_is_no_answer(raw: bytes, problem: str) -> None:
    with pytest.raises((client.Unreachable, ValueError), match=problem):
        client._parse(raw, client.Endpoint("/s"))


@pytest.mark.parametrize("event", ["", "a b", "x\r\nHost: y", "é", "a" * 65, "../stop"])
def test_names_that_are_no_event_are_refused(event: str) -> None:
    assert client.bad_event_name(event)
