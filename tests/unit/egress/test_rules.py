"""Egress rules: what a rule may say, and the Squid configuration it becomes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from cloudrunner.egress.rules import EgressRules, EgressSettings, domain_pattern, squid_config
from cloudrunner.settings import Settings


@pytest.mark.parametrize(
    ("rule", "matches", "misses"),
    [
        ("api.example.com", ["api.example.com", "API.Example.com"],
         ["example.com", "x.api.example.com", "api.example.com.evil.test", "apiXexample.com"]),
        ("*.example.com", ["a.example.com", "a.b.example.com"],
         ["example.com", "evilexample.com", "a.example.com.evil.test"]),
    ],
)  # fmt: skip
def test_domain_patterns_are_exact(rule: str, matches: list[str], misses: list[str]) -> None:
    pattern = re.compile(domain_pattern(rule), re.I)
    for name in matches:
        assert pattern.search(name), name
    for name in misses:
        assert not pattern.search(name), name


@given(st.from_regex(r"[a-z0-9]{1,10}(\.[a-z0-9]{1,10}){1,3}", fullmatch=True))
def test_a_rule_matches_its_own_name_and_nothing_longer(name: str) -> None:
    pattern = re.compile(domain_pattern(name), re.I)
    assert pattern.search(name)
    assert not pattern.search("x" + name) and not pattern.search(name + ".evil")


@pytest.mark.parametrize(
    "bad",
    ["https://api.example.com", "api.example.com/path", "api.example.com:443", "10.0.0.1",
     "*", "*.com.", "exa mple.com", "localhost", "**.example.com", "a..b.com", ""],
)  # fmt: skip
def test_what_is_not_a_domain_rule_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="is not a domain rule"):
        EgressRules(policy="allowlist", domains=(bad,))


def test_rules_are_normalised() -> None:
    rules = EgressRules.model_validate(
        {"policy": "allowlist", "domains": ["API.Example.COM.", "api.example.com"],
         "methods": ["get", "GET", "post"]}
    )  # fmt: skip
    assert rules.domains == ("api.example.com",) and rules.methods == ("GET", "POST")
    with pytest.raises(ValidationError, match="CONNECT is not a rule"):
        EgressRules(methods=("CONNECT",))


@pytest.mark.parametrize("kind", ["project", "user"])
def test_project_and_user_hooks_never_get_an_open_network(kind: str) -> None:
    with pytest.raises(ValidationError, match="never get an open network"):
        EgressSettings.model_validate({kind: {"policy": "open"}})
    EgressSettings.model_validate({"enterprise": {"policy": "open"}})


def test_an_allowlist_with_a_named_sandbox_network_is_a_contradiction() -> None:
    with pytest.raises(ValidationError, match="an allowlist puts the hooks"):
        Settings.model_validate(
            {"egress": {"team": {"policy": "allowlist", "domains": ["a.example.com"]}},
             "sandbox": {"per_source": {"team": {"network": "corp"}}}}
        )  # fmt: skip


def test_squid_config_per_source() -> None:
    text = squid_config(
        {
            "project": EgressRules(policy="allowlist", domains=("registry.npmjs.org", "*.mem0.ai")),
            "team": EgressRules(
                policy="allowlist", domains=("hooks.slack.com",), methods=("POST",)
            ),
            "user": EgressRules(policy="allowlist"),  # no domains: nothing allowed
        },
        log_path="/log/access.log", key_path="/conf/key", helper="/helper.py",
        grant_helper="/grant.py", grants_path="/conf/grants.json",
    )  # fmt: skip
    lines = text.splitlines()
    assert "http_access deny !authenticated" in lines
    assert lines.index("http_access deny !authenticated") < lines.index(
        "http_access allow src_project dom_project CONNECT"
    )
    assert r"acl src_project proxy_auth_regex ^project\." in lines
    assert "http_access allow src_project dom_project !CONNECT" in lines
    assert "acl meth_team method POST" in lines
    assert "http_access allow src_team dom_team !CONNECT meth_team" in lines
    assert not any("src_user" in line for line in lines)
    assert lines[-1] == "http_access deny all"
    assert "auth_param basic program /usr/bin/python3 /helper.py /conf/key" in lines
    # names only: no rule may look an address up in reverse DNS
    assert all(" -n " in line for line in lines if "dstdom" in line)
    assert not any(t in text for t in (" dstdomain ", " dst ", " srcdomain "))
    # every credential is checked against its run, uncached, before any allow
    grant = next(line for line in lines if line.startswith("external_acl_type run_grant "))
    assert "ttl=0 negative_ttl=0" in grant and grant.endswith("/grant.py /conf/grants.json")
    assert lines.index("http_access deny !granted all") < lines.index(
        "http_access allow src_project dom_project CONNECT"
    )
    assert "http_access deny !CONNECT !http_port" in lines  # plain HTTP: port 80 only


def test_listed_addresses_get_their_own_rule_and_bad_ones_are_refused() -> None:
    rules = EgressRules(policy="allowlist", addresses=(" 192.0.2.10", "2001:DB8::1"))
    assert rules.addresses == ("192.0.2.10", "2001:db8::1")
    text = squid_config(
        {"project": rules}, log_path="/l", key_path="/k", helper="/h", grant_helper="/g",
        grants_path="/j",
    )  # fmt: skip
    assert r"acl addr_project dstdom_regex -n -i ^192\.0\.2\.10$ ^\[?2001:db8::1\]?$" in text
    assert "http_access allow src_project addr_project CONNECT" in text
    assert "dom_project" not in text
    for bad in ["192.0.2.0/24", "[2001:db8::1]", "example.com", "192.0.2.10:80", "", 7]:
        with pytest.raises(ValidationError, match="is not an IP address"):
            EgressRules(policy="allowlist", addresses=(bad,))  # type: ignore[arg-type]


def test_sandbox_subnets_take_a_private_range_that_fits_the_size() -> None:
    ok = EgressSettings.model_validate({"sandbox_subnets": " 10.213.0.0/16 "})
    assert ok.sandbox_subnets == "10.213.0.0/16" and ok.sandbox_subnet_size == 28
    for bad, why in [
        ("10.213.0.1/16", "not an IPv4 range"), ("fd00::/64", "not an IPv4 range"),
        ("nonsense", "not an IPv4 range"), ("8.8.0.0/16", "private IPv4 range"),
        ("10.0.0.0/30", "private IPv4 range"),
    ]:  # fmt: skip
        with pytest.raises(ValidationError, match=why):
            EgressSettings.model_validate({"sandbox_subnets": bad})
    with pytest.raises(ValidationError, match="does not fit"):
        EgressSettings.model_validate({"sandbox_subnets": "10.1.0.0/29", "sandbox_subnet_size": 28})
    with pytest.raises(ValidationError):
        EgressSettings.model_validate({"sandbox_subnet_size": 30})
