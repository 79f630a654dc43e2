"""The proxy's access log read back and attributed to the hook run that made each attempt."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path

from cloudrunner.egress.access_log import AccessLogReader, parse_line, record_fields
from cloudrunner.egress.credentials import CredentialIssuer, RunAttribution, password
from cloudrunner.egress.grants import GrantBook

RUN = RunAttribution("project", "beforeShellExecution", "c1", "g1", "project:0", "./x.sh", "s1")
THIEF = RunAttribution("project", "stop", "c2", "g2", "project:0", "./x.sh", "s2")


def line(
    user: str, method: str, url: str, host: str, port: str, status: str, result: str,
    *, client: str = "192.168.32.3", when: float | None = None, note: str = "-",
) -> str:  # fmt: skip
    fields = [
        f"{time.time() if when is None else when:.3f}",
        user,
        client,
        method,
        url,
        host,
        port,
        status,
        "3394",
        "242",
        result,
        note,
    ]
    return "\t".join(fields) + "\n"


def test_allowed_refused_and_tunnels_are_told_apart() -> None:
    ok = parse_line(line("u", "GET", "http://a.test/x", "a.test", "80", "200", "TCP_MISS"))
    tunnel = parse_line(line("u", "CONNECT", "a.test:443", "a.test", "443", "200", "TCP_TUNNEL"))
    denied = parse_line(line("u", "GET", "http://b.test/", "b.test", "80", "403", "TCP_DENIED"))
    unauth = parse_line(line("-", "GET", "http://b.test/", "b.test", "80", "407", "TCP_DENIED"))
    assert ok and ok.allowed and ok.port == 80 and ok.bytes_to_hook == 3394
    assert tunnel and tunnel.allowed and tunnel.host == "a.test"
    assert denied and not denied.allowed
    assert unauth and not unauth.allowed
    assert parse_line("garbage\n") is None and parse_line("x\t" * 10 + "y") is None


def test_records_name_the_run_whose_credential_was_used(tmp_path: Path) -> None:
    issuer = CredentialIssuer(b"k" * 64, GrantBook(tmp_path))
    user = issuer.issue(RUN, network="n", subnets=("192.168.32.0/24",), lifetime_s=60)
    env = issuer.environment(user)
    assert env["HTTP_PROXY"].split("//", 1)[1].split(":", 1)[0] == user
    assert user.startswith("project.")
    secret = env["HTTP_PROXY"].split(":")[2].split("@")[0]
    assert secret == hmac.new(b"k" * 64, user.encode(), hashlib.sha256).hexdigest()[:40]
    assert secret == password(b"k" * 64, user)
    log = tmp_path / "access.log"
    log.write_text(line(user, "GET", "http://a.test/", "a.test", "80", "200", "TCP_MISS"))
    reader = AccessLogReader(log)
    (attempt,) = reader.new_attempts()
    fields = record_fields(attempt, issuer.book)
    assert fields["decision"] == "allowed" and fields["hook_id"] == "project:0"
    assert fields["event"] == "beforeShellExecution" and fields["source"] == "project"
    stranger = parse_line(
        line("team.0000", "GET", "http://a.test/", "a.test", "80", "403", "TCP_DENIED")
    )
    assert stranger is not None
    # an unknown credential from the run's sandbox network: attributed to that sandbox
    fields = record_fields(stranger, issuer.book)
    assert fields["source"] == "project" and fields["session"] == "s1"
    assert fields["hook_id"] == "project:0" and "by its address" in fields["attribution"]
    elsewhere = parse_line(
        line("-", "GET", "http://a.test/", "a.test", "80", "407", "TCP_DENIED", client="10.9.9.9")
    )
    assert elsewhere is not None
    fields = record_fields(elsewhere, issuer.book)
    assert fields["source"] == "unknown" and fields["attribution"].startswith("none")


def test_the_reader_returns_only_new_complete_lines(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    log.write_text(line("u", "GET", "http://a.test/", "a.test", "80", "200", "TCP_MISS"))
    reader = AccessLogReader(log)
    reader.skip_to_end()
    assert reader.new_attempts() == []
    whole = line("u", "GET", "http://b.test/", "b.test", "80", "200", "TCP_MISS")
    with log.open("a") as fh:
        fh.write(whole + whole[:20])  # one line and the start of another
    assert [a.host for a in reader.new_attempts()] == ["b.test"]
    with log.open("a") as fh:
        fh.write(whole[20:])
    assert [a.host for a in reader.new_attempts()] == ["b.test"]
    log.unlink()
    log.write_text(whole)  # rotated: a new file is read from its start
    assert len(reader.new_attempts()) == 1


def test_a_refused_reuse_names_the_run_it_was_issued_to_and_the_one_that_used_it(
    tmp_path: Path,
) -> None:
    book = GrantBook(tmp_path)
    issuer = CredentialIssuer(b"k" * 64, book)
    stolen = issuer.issue(RUN, network="a", subnets=("10.1.0.0/24",), lifetime_s=60)
    issuer.issue(THIEF, network="b", subnets=("10.2.0.0/24",), lifetime_s=60)
    book.end([stolen])
    live = json.loads((tmp_path / "conf" / "grants.json").read_text())["grants"]
    assert stolen not in live and len(live) == 1  # the proxy refuses it from now on
    attempt = parse_line(
        line(stolen, "GET", "http://a.test/", "a.test", "80", "403", "TCP_DENIED",
             client="10.2.0.5", note="not-live")
    )  # fmt: skip
    assert attempt is not None and attempt.refusal == "not-live"
    # another process (a later `cloudrunner run`) reads the ledger to attribute it
    fields = record_fields(attempt, GrantBook(tmp_path))
    assert fields["decision"] == "refused" and fields["refusal"] == "not-live"
    assert fields["credential_run"]["conversation_id"] == "c1"
    assert fields["session"] == "s2" and fields["source"] == "project"
    assert [r["conversation_id"] for r in fields["used_from"]["runs"]] == ["c2"]


def test_an_old_line_without_the_run_check_field_still_parses() -> None:
    text = line("u", "GET", "http://a.test/", "a.test", "80", "200", "TCP_MISS")
    old = text.rsplit("\t", 1)[0] + "\n"
    parsed = parse_line(old)
    assert parsed is not None and parsed.refusal == ""


def test_two_readers_share_one_position_so_each_line_is_recorded_once(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    first, second = AccessLogReader(log), AccessLogReader(log)
    first.skip_to_end()
    second.skip_to_end()
    log.write_text(line("u", "GET", "http://a.test/", "a.test", "80", "200", "TCP_MISS") * 2)
    assert len(first.new_attempts()) == 2 and second.new_attempts() == []
