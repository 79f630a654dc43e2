"""Latency an egress proxy adds: the same HTTP request from a hook container through the
allowlisting proxy, and on an open test network, side by side in one run.

    .venv/bin/python -m bench.egress_latency [--requests N]

Everything it talks to is its own: a test network, an HTTP server container on it (named
`allowed.test` by a network alias) and the worker's egress proxy (image
cloudrunner/egress-proxy:latest) with that network as its outbound one. Each side runs N
requests with `curl -w %{time_total}` inside one container (the container start is not
timed), and the table gives p50 and p90 per side and their ratio. Everything it made is
removed afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import uuid
from pathlib import Path

import docker

from cloudrunner.egress.credentials import CredentialIssuer, RunAttribution
from cloudrunner.egress.proxy import EgressProxy
from cloudrunner.egress.rules import EgressRules
from cloudrunner.images import DEFAULT_RUNTIME_IMAGE, EGRESS_PROXY_REPOSITORY
from cloudrunner.protocol.profiles import SourceKind

SERVER = (
    "import http.server\n"
    "class Quiet(http.server.SimpleHTTPRequestHandler):\n"
    "    def log_message(self, *a): pass\n"
    "http.server.ThreadingHTTPServer(('', 80), Quiet).serve_forever()\n"
)


def _times(client: docker.DockerClient, network: str, env: dict[str, str], n: int) -> list[float]:
    script = (
        f"for i in $(seq {n}); do curl -s -o /dev/null -w '%{{time_total}}\\n' "
        "--max-time 10 http://allowed.test/; done"
    )
    out = client.containers.run(
        DEFAULT_RUNTIME_IMAGE, ["sh", "-c", script], network=network, environment=env,
        remove=True, user="10001:10001",
    )  # fmt: skip
    return [float(x) * 1000 for x in out.decode().split()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.egress_latency", description=__doc__)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args(argv)
    client = docker.from_env()
    run = uuid.uuid4().hex[:10]
    labels = {"cloudrunner.worker": f"bench-egress-{run}"}
    name = f"crbench-internet-{run}"
    net = client.networks.create(name, driver="bridge", labels=labels)
    server = client.containers.create(
        DEFAULT_RUNTIME_IMAGE, ["python3", "-c", SERVER], user="0:0", labels=labels
    )
    with tempfile.TemporaryDirectory(prefix="crbench-egress-") as state:
        proxy = EgressProxy(
            client, state_dir=Path(state), worker_id=f"bench-egress-{run}",
            image=f"{EGRESS_PROXY_REPOSITORY}:latest", outbound_network=name,
        )  # fmt: skip
        try:
            net.connect(server, aliases=["allowed.test"])
            server.start()
            proxy.ensure(
                {SourceKind.PROJECT: EgressRules(policy="allowlist", domains=("allowed.test",))}
            )
            internal, subnets = proxy.sandbox_network("bench", SourceKind.PROJECT)
            issuer = CredentialIssuer(proxy.key(), proxy.book)
            attribution = RunAttribution("project", "bench", "c", "g", "h", "curl", "bench")
            user = issuer.issue(attribution, network=internal, subnets=subnets, lifetime_s=3600)
            env = issuer.environment(user)
            _times(client, name, {}, 3)  # warm both paths once
            _times(client, internal, env, 3)
            direct = _times(client, name, {}, args.requests)
            proxied = _times(client, internal, env, args.requests)
        finally:
            proxy.remove()
            server.remove(force=True)
            net.remove()
    rows = [("open network", direct), ("through the egress proxy", proxied)]
    print(f"{'path':<28}{'p50 ms':>10}{'p90 ms':>10}{'n':>6}")
    for name, values in rows:
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"{name:<28}{statistics.median(values):>10.2f}{p90:>10.2f}{len(values):>6}")
    ratio = statistics.median(proxied) / statistics.median(direct)
    added = statistics.median(proxied) - statistics.median(direct)
    print(f"proxy / open: {ratio:.2f}x p50 (+{added:.2f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
