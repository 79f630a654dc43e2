"""Network egress for hooks: per-source policy, the Squid proxy that enforces it, and the
audit of every connection attempt.

- `rules`: the policy model (none / allowlist / open, domains, methods) and the Squid
  configuration it becomes;
- `credentials`: the per-run proxy credential that lets the proxy attribute a connection
  to one hook run of one event;
- `proxy`: the proxy container and the internal network, supervised by the worker;
- `access_log`: the proxy's access log read back as `egress` audit records;
- `manager`: one worker's egress (a source's network, a run's proxy variables, the rules
  file); `grants`: the runs whose credentials are live.

Its names are exported lazily: the settings read the rules model without the proxy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cloudrunner import lazy_export

if TYPE_CHECKING:
    from cloudrunner.egress.credentials import RunAttribution
    from cloudrunner.egress.manager import Egress, EgressRulesError
    from cloudrunner.egress.proxy import EgressUnavailable
    from cloudrunner.egress.rules import EgressRules, EgressSettings, domain_pattern

#: each name is imported from its module on first use (`cloudrunner.lazy_export`)
_WHERE = {
    "RunAttribution": "cloudrunner.egress.credentials",
    "Egress": "cloudrunner.egress.manager",
    "EgressRulesError": "cloudrunner.egress.manager",
    "EgressUnavailable": "cloudrunner.egress.proxy",
    "EgressRules": "cloudrunner.egress.rules",
    "EgressSettings": "cloudrunner.egress.rules",
    "domain_pattern": "cloudrunner.egress.rules",
}


def __getattr__(name: str) -> Any:
    return lazy_export(globals(), _WHERE, name)


__all__ = [
    "Egress",
    "EgressRules",
    "EgressRulesError",
    "EgressSettings",
    "EgressUnavailable",
    "RunAttribution",
    "domain_pattern",
]
