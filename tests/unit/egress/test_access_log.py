"""The proxy's access log read back and attributed to the hook run that made each attempt."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from cloudrunner.egress.access_log import AccessLogReader, parse_line, record_fields
from cloudrunner.egress.credentials import CredentialIssuer, RunAttribution, password

RUN = RunAttribution("project", "beforeShellExecution", "c1", "g1", "project:0", "./x.sh")


def line(user: str, method: str, url: str, host: str, port: str, status: str, result: str) -> str:
    fields = [
        "1796368883.924",
        user,
        "192.168.32.3",
        method,
        url,
        host,
        port,
        status,
        "3394",
        "242",
        result,
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
    issuer = CredentialIssuer(b"k" * 64)
    env = issuer.environment(RUN)
    user = env["HTTP_PROXY"].split("//", 1)[1].split(":", 1)[0]
    assert user.startswith("project.")
    secret = env["HTTP_PROXY"].split(":")[2].split("@")[0]
    assert secret == hmac.new(b"k" * 64, user.encode(), hashlib.sha256).hexdigest()[:40]
    assert secret == password(b"k" * 64, user)
    log = tmp_path / "access.log"
    log.write_text(line(user, "GET", "http://a.test/", "a.test", "80", "200", "TCP_MISS"))
    reader = AccessLogReader(log)
    (attempt,) = reader.new_attempts()
    fields = record_fields(attempt, issuer)
    assert fields["decision"] == "allowed" and fields["hook_id"] == "project:0"
    assert fields["event"] == "beforeShellExecution" and fields["source"] == "project"
    stranger = parse_line(
        line("team.0000", "GET", "http://a.test/", "a.test", "80", "403", "TCP_DENIED")
    )
    assert stranger is not None
    assert record_fields(stranger, issuer)["attribution"].startswith("none")


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
