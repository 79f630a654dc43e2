"""Egress policy per source, and the Squid configuration that enforces it.

A source's policy is `none` (no network: the default, and the only choice besides
`allowlist` for project and user hooks), `allowlist` (hooks sit on an internal network of
their own sandbox with no route out and reach the outside only through the proxy, which lets
through the listed domains: exact names, or `*.example.com` for any name under example.com
but not example.com itself, decided on the name as the hook wrote it, never on a lookup of an
address; an IP literal only when it is in `addresses`; HTTPS by the CONNECT host to port 443,
without interception; plain HTTP to port 80, optionally limited to some methods), or
`open` (enterprise and team only: the operator's explicit choice of a whole Docker network,
`sandbox.network` or Docker's default bridge).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cloudrunner.protocol.profiles import SOURCE_NAMES, SourceKind

Policy = Literal["none", "allowlist", "open"]
SOURCE_KINDS = SOURCE_NAMES
PROXY_PORT = 3128
#: the proxy's name on the internal network (a network alias)
PROXY_HOST = "cloudrunner-egress-proxy"

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_NAME = re.compile(rf"^(\*\.)?{_LABEL}(?:\.{_LABEL})+$")
_METHOD = re.compile(r"^[A-Z]{3,10}$")


def domain_pattern(rule: str) -> str:
    """An anchored, case-insensitive regular expression for one domain rule."""
    if rule.startswith("*."):
        return r"^([a-z0-9-]+\.)+" + re.escape(rule[2:]) + "$"
    return "^" + re.escape(rule) + "$"


class EgressRules(BaseModel):
    """What one source's hooks may reach."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    policy: Policy = "none"
    """none: no network; allowlist: only `domains`, through the egress proxy; open (enterprise
    and team only): a whole Docker network (sandbox.network, else Docker's bridge)"""
    domains: tuple[str, ...] = ()
    """allowlist: the names hooks may reach: `api.example.com`, or `*.example.com` for any
    name under example.com (not example.com itself)"""
    addresses: tuple[str, ...] = ()
    """allowlist: IP addresses hooks may reach by address (`192.0.2.10`, `2001:db8::1`), in
    any spelling the proxy reads as that address; no other IP literal passes, whatever its
    reverse DNS name"""
    methods: tuple[str, ...] = ()
    """allowlist: the HTTP methods plain-HTTP requests may use (empty: any); HTTPS is
    allowed by host, as its requests are not visible to the proxy"""

    @field_validator("domains", mode="before")
    @classmethod
    def _domains(cls, value: object) -> object:
        if not isinstance(value, list | tuple):
            return value
        out = []
        for item in value:
            if not isinstance(item, str):
                raise ValueError(f"{item!r} is not a domain name")
            name = item.strip().lower().rstrip(".")
            # a name, not an address: its last label (the TLD) is never all digits
            if not _NAME.match(name) or name.rsplit(".", 1)[-1].isdigit():
                raise ValueError(
                    f"{item!r} is not a domain rule: write a name (api.example.com) or a "
                    "wildcard for the names under one (*.example.com); no scheme, path, port "
                    "or IP address"
                )
            out.append(name)
        return tuple(dict.fromkeys(out))

    @field_validator("addresses", mode="before")
    @classmethod
    def _addresses(cls, value: object) -> object:
        if not isinstance(value, list | tuple):
            return value
        out = []
        for item in value:
            text = str(item).strip() if isinstance(item, str) else ""
            try:
                address = ipaddress.ip_address(text)
            except ValueError:
                raise ValueError(
                    f"{item!r} is not an IP address: write one address per entry (192.0.2.10, "
                    "2001:db8::1), no port, prefix or brackets; names go in `domains`"
                ) from None
            out.append(str(address))
        return tuple(dict.fromkeys(out))

    @field_validator("methods", mode="before")
    @classmethod
    def _methods(cls, value: object) -> object:
        if not isinstance(value, list | tuple):
            return value
        out = []
        for item in value:
            method = str(item).strip().upper()
            if not _METHOD.match(method) or method == "CONNECT":
                raise ValueError(
                    f"{item!r} is not an HTTP method for plain-HTTP requests (GET, POST, ...; "
                    "HTTPS is allowed by host, CONNECT is not a rule)"
                )
            out.append(method)
        return tuple(dict.fromkeys(out))


class EgressSettings(BaseModel):
    """The egress policy of every source, and the proxy that enforces `allowlist`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    enterprise: EgressRules = EgressRules()
    team: EgressRules = EgressRules()
    project: EgressRules = EgressRules()
    user: EgressRules = EgressRules()
    proxy_image: str = Field("cloudrunner/egress-proxy:latest", min_length=1)
    """the egress proxy image (`cloudrunner images build` builds it)"""
    outbound_network: str = Field("bridge", min_length=1)
    """the Docker network through which the proxy reaches the outside"""
    sandbox_subnets: str | None = None
    """a private IPv4 range (`10.213.0.0/16`) from which each sandbox's egress network gets a
    range of `sandbox_subnet_size` of its own; unset: the engine's default address pools,
    which hold only a few dozen networks at once"""
    sandbox_subnet_size: int = Field(28, ge=16, le=29)
    """the prefix length of each sandbox network's range taken from `sandbox_subnets` (28:
    13 containers besides the proxy)"""
    rules_file: Path | None = None
    """a TOML file of per-source tables ([project] policy/domains/addresses/methods, ...)
    that replace the rules above; re-read when it changes, so new rules hold from the next
    connection"""

    @field_validator("sandbox_subnets")
    @classmethod
    def _subnets(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            network = ipaddress.IPv4Network(value.strip(), strict=True)
        except ValueError:
            raise ValueError(
                f"{value!r} is not an IPv4 range: write a network and its prefix length "
                "(10.213.0.0/16), with no host bits set"
            ) from None
        if not network.is_private or network.prefixlen > 29:
            raise ValueError(
                f"{value!r} must be a private IPv4 range (10.0.0.0/8, 172.16.0.0/12, "
                "192.168.0.0/16) of at least 8 addresses"
            )
        return str(network)

    @model_validator(mode="after")
    def _size_fits(self) -> EgressSettings:
        pool = self.sandbox_subnets
        if pool is not None and ipaddress.IPv4Network(pool).prefixlen > self.sandbox_subnet_size:
            raise ValueError(
                f"sandbox_subnet_size {self.sandbox_subnet_size} does not fit in "
                f"sandbox_subnets {pool}: make the range wider or the size larger"
            )
        return self

    @field_validator(SourceKind.PROJECT, SourceKind.USER)
    @classmethod
    def _never_open(cls, value: EgressRules) -> EgressRules:
        if value.policy == "open":
            raise ValueError(
                'project and user hooks never get an open network; use policy "allowlist" '
                "with the domains they need"
            )
        return value

    def rules_for(self, kind: SourceKind) -> EgressRules:
        rules: EgressRules = getattr(self, kind)
        return rules

    @property
    def allowlisted(self) -> dict[SourceKind, EgressRules]:
        return {k: self.rules_for(k) for k in SourceKind if self.rules_for(k).policy == "allowlist"}


def address_pattern(address: str) -> str:
    """An anchored expression for one allowed address, as Squid holds the URL's host (an
    IPv6 address may come with or without its brackets)."""
    if ":" in address:
        return r"^\[?" + re.escape(address) + r"\]?$"
    return "^" + re.escape(address) + "$"


def squid_config(rules: Mapping[SourceKind, EgressRules], *, log_path: str, key_path: str,
                 helper: str, grant_helper: str, grants_path: str) -> str:  # fmt: skip
    """squid.conf for the allowlisted sources in `rules` (kind -> rules).

    Every destination rule is `dstdom_regex -n`: it matches the host as the request wrote it
    and never looks an address up in reverse DNS (whose answer the address's owner chooses).
    A credential passes only when `grant_helper` finds its run live and the connection comes
    from that run's sandbox network."""
    lines = [
        "# Written by cloudrunner; every change is applied with a reconfigure.",
        f"http_port {PROXY_PORT}",
        "pid_filename none",
        "cache deny all",
        "cache_mem 0 MB",
        "shutdown_lifetime 1 seconds",
        "forwarded_for delete",
        "via off",
        "httpd_suppress_version_string on",
        "pinger_enable off",
        "cache_log stdio:/dev/stderr",
        "logfile_rotate 0",
        "buffered_logs off",
        "logformat cloudrunner %ts.%03tu\t%un\t%>a\t%rm\t%ru\t%>rd\t%>rP\t%>Hs\t%<st\t%>st\t%Ss"
        "\t%ea",
        f"access_log stdio:{log_path} cloudrunner",
        f"auth_param basic program /usr/bin/python3 {helper} {key_path}",
        "auth_param basic children 2 startup=1 idle=1",
        "auth_param basic realm cloudrunner-egress",
        "auth_param basic credentialsttl 1 hour",
        # no caching of the answer: a run's credential dies the moment its run ends
        f"external_acl_type run_grant ttl=0 negative_ttl=0 children-max=4 children-startup=1 "
        f"%>a %ul /usr/bin/python3 {grant_helper} {grants_path}",
        "acl authenticated proxy_auth REQUIRED",
        "acl granted external run_grant",
        "acl CONNECT method CONNECT",
        "acl https_port port 443",
        "acl http_port port 80",
        "http_access deny !authenticated",
        "http_access deny !granted all",  # `all` last: a 403, not a new challenge
        "http_access deny CONNECT !https_port",
        "http_access deny !CONNECT !http_port",
    ]
    for kind, rule in rules.items():
        if rule.policy != "allowlist" or not (rule.domains or rule.addresses):
            continue
        lines.append(f"acl src_{kind} proxy_auth_regex ^{kind}\\.")
        if rule.methods:
            lines.append(f"acl meth_{kind} method " + " ".join(rule.methods))
        targets = {
            f"dom_{kind}": [domain_pattern(d) for d in rule.domains],
            f"addr_{kind}": [address_pattern(a) for a in rule.addresses],
        }
        for acl, patterns in targets.items():
            if not patterns:
                continue
            lines.append(f"acl {acl} dstdom_regex -n -i " + " ".join(patterns))
            lines.append(f"http_access allow src_{kind} {acl} CONNECT")
            methods = f" meth_{kind}" if rule.methods else ""
            lines.append(f"http_access allow src_{kind} {acl} !CONNECT{methods}")
    lines.append("http_access deny all")
    return "\n".join(lines) + "\n"
