"""The proxy's run check (images/egress-proxy/check_grant.py), run as Squid runs it: one
request line in, one answer line out, against a grants file the worker writes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cloudrunner.egress.credentials import CredentialIssuer, RunAttribution, user_of
from cloudrunner.egress.grants import GrantBook

HELPER = Path(__file__).resolve().parents[3] / "images" / "egress-proxy" / "check_grant.py"
RUN = RunAttribution("project", "stop", "c1", "g1", "project:0", "./x.sh", "s1")


def ask(grants: Path, *lines: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, str(HELPER), str(grants)],
        input="".join(line + "\n" for line in lines), capture_output=True, text=True,
        timeout=30, check=True,
    )  # fmt: skip
    return proc.stdout.splitlines()


def test_a_credential_passes_from_its_network_while_its_run_lives(tmp_path: Path) -> None:
    book = GrantBook(tmp_path)
    issuer = CredentialIssuer(b"k" * 64, book)
    user = issuer.issue(RUN, network="n", subnets=("10.7.0.0/24",), lifetime_s=60)
    grants = tmp_path / "conf" / "grants.json"
    assert ask(grants, f"10.7.0.3 {user} -", f"10.8.0.3 {user} -", "10.7.0.3 project.ffff -") == [
        "OK", "ERR log=wrong-source", "ERR log=not-live",
    ]  # fmt: skip
    book.end([user])
    assert ask(grants, f"10.7.0.3 {user} -") == ["ERR log=not-live"]


def test_an_expired_grant_is_refused_though_its_run_never_said_it_ended(tmp_path: Path) -> None:
    grants = tmp_path / "grants.json"
    grants.write_text(
        json.dumps(
            {"grants": {"project.1": {"subnets": ["10.7.0.0/24"], "expires": time.time() - 1}}}
        )
    )
    assert ask(grants, "10.7.0.3 project.1") == ["ERR log=expired"]


def test_a_missing_torn_or_hostile_grants_file_lets_nothing_through(tmp_path: Path) -> None:
    grants = tmp_path / "grants.json"
    assert ask(grants, "10.7.0.3 project.1") == ["ERR log=not-live"]
    grant = '{"grants": {"project.1": {"subnets": %s, "expires": %s}}}'
    for text in [
        '{"grants": {"project.1": {"subnets": ["10.7.0.0/24"], "expi', "[1, 2]",
        grant % ('"10.7.0.0/24"', "1e20"), grant % ('["nonsense"]', "1e20"),
        grant % ('["10.7.0.0/24"]', '"x"'), grant % ("null", "1e20"),
    ]:  # fmt: skip
        grants.write_text(text)
        assert ask(grants, "10.7.0.3 project.1") != ["OK"], text


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.text(
            st.characters(blacklist_characters="\n\r\x00", blacklist_categories=("Cs",)),
            max_size=40,
        ),
        max_size=4,
    )
)
def test_any_request_line_gets_exactly_one_answer_and_never_ok(words: list[str]) -> None:
    grants = Path("/nonexistent/grants.json")
    answers = ask(grants, " ".join(words), "10.0.0.1 project.1")
    assert len(answers) == 2 and all(a.startswith("ERR") for a in answers)


def test_a_credential_tied_to_its_container_is_refused_from_the_rest_of_its_network(
    tmp_path: Path,
) -> None:
    book = GrantBook(tmp_path)
    issuer = CredentialIssuer(b"k" * 64, book)
    user = issuer.issue(RUN, network="n", subnets=("10.7.0.0/24",), lifetime_s=60)
    assert user_of(issuer.proxy_url(user)) == user
    assert user_of("http://[bad") is None and user_of("") is None
    book.narrow(user, "10.7.0.3/32")
    grants = tmp_path / "conf" / "grants.json"
    assert ask(grants, f"10.7.0.3 {user}", f"10.7.0.4 {user}") == ["OK", "ERR log=wrong-source"]
    book.narrow("project.unknown", "10.7.0.4/32")  # not live: nothing is granted
    assert ask(grants, "10.7.0.4 project.unknown") == ["ERR log=not-live"]
