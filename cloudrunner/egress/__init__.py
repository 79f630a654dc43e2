"""Network egress for hooks: per-source policy, the Squid proxy that enforces it, and the
audit of every connection attempt.

- `rules`: the policy model (none / allowlist / open, domains, methods) and the Squid
  configuration it becomes;
- `credentials`: the per-run proxy credential that lets the proxy attribute a connection
  to one hook run of one event;
- `proxy`: the proxy container and the internal network, supervised by the worker;
- `access_log`: the proxy's access log read back as `egress` audit records.
"""
