"""Egress through the allowlisting proxy, end to end with real containers and a real Squid.

The "internet" is one server container on a network this test creates, answering HTTP on
port 80 and HTTPS on 443 (a certificate the test makes), reachable as `allowed.test` and
`denied.test` (network aliases) from the proxy only. Project hooks sit on the proxy's
internal network; nothing here sends traffic anywhere but to these containers.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from cloudrunner.egress.proxy import ROLE_LABEL
from cloudrunner.images import BASE_IMAGE, context_key, images_dir
from tests.e2e.conftest import Deployment
from tests.support.ci import missing
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import git

pytestmark = pytest.mark.docker

#: the proxy image built from this tree (its own tag: the shared :latest may be older)
TEST_PROXY_REPOSITORY = "crtest-egress-proxy"
SERVER = textwrap.dedent(
    """
    import http.server, ssl, threading
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args): pass
    plain = http.server.ThreadingHTTPServer(("", 80), Quiet)
    secure = http.server.ThreadingHTTPServer(("", 443), Quiet)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain("/srv/tls/cert.pem", "/srv/tls/key.pem")
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    secure.serve_forever()
    """
)
PROBE = textwrap.dedent(
    """\
    #!/bin/bash
    # what this hook can reach: through the proxy (allowed, refused, https) and around it
    ip=$(jq -r .command)
    code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@" || true; }
    # the two tries around the proxy wait out their timeouts at once, meanwhile the rest
    exec 4< <(code --noproxy '*' --max-time 3 "http://$ip/")
    exec 5< <(timeout 3 bash -c "exec 3<>/dev/tcp/$ip/443" 2>/dev/null && echo open || echo noroute)
    a=$(code http://allowed.test/)
    b=$(code http://denied.test/)
    c=$(code --cacert .cursor/ca.pem https://allowed.test/)
    d=$(cat <&4)
    e=$(cat <&5)
    printf '{"permission": "deny", "user_message": "%s %s %s %s %s"}' "$a" "$b" "$c" "$d" "$e"
    """
)


@pytest.fixture(scope="session")
def proxy_image(docker_client: docker.DockerClient) -> Iterator[str]:
    """The egress proxy image of this tree's `images/egress-proxy`, tagged by its build key
    (removed at the end when this session built it)."""
    try:
        base = docker_client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        missing(f"image {BASE_IMAGE} is missing; run `cloudrunner images build`")
    context = images_dir() / "egress-proxy"
    ref = f"{TEST_PROXY_REPOSITORY}:{context_key(context, str(base.id))[:16]}"
    try:
        docker_client.images.get(ref)
        built = False
    except docker.errors.ImageNotFound:
        docker_client.images.build(
            path=str(context), tag=ref, rm=True, buildargs={"BASE": BASE_IMAGE}
        )
        built = True
    yield ref
    if built:
        with contextlib.suppress(docker.errors.APIError):
            docker_client.images.remove(ref)


def start_server(
    client: docker.DockerClient, tracker: DockerTracker, tmp_path: Path, aliases: list[str]
) -> tuple[str, str, Path, str]:
    """(network name, address, CA file, container name) of a server on a network of its own,
    answering HTTP on 80 and HTTPS on 443 as `aliases`."""
    tls = tmp_path / "tls"
    tls.mkdir()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=allowed.test", "-addext", "subjectAltName=DNS:allowed.test",
         "-keyout", str(tls / "key.pem"), "-out", str(tls / "cert.pem")],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    (tls / "key.pem").chmod(0o644)
    tls.chmod(0o755)
    tag = uuid.uuid4().hex[:10]
    name, server_name = f"crtest-internet-{tag}", f"crtest-server-{tag}"
    network = tracker.track(client.networks.create(name, driver="bridge", labels=tracker.labels))
    server = tracker.track(
        client.containers.create(
            "cloudrunner/hook-runtime:latest", ["python3", "-c", SERVER], user="0:0",
            labels=tracker.labels, network=name, name=server_name,
            volumes={str(tls): {"bind": "/srv/tls", "mode": "ro"}},
        )
    )  # fmt: skip
    network.disconnect(server)
    network.connect(server, aliases=aliases)
    server.start()
    server.reload()
    address = server.attrs["NetworkSettings"]["Networks"][name]["IPAddress"]
    return name, address, tls / "cert.pem", server_name


@pytest.fixture
def internet(
    docker_client: docker.DockerClient, docker_tracker: DockerTracker, tmp_path: Path,
    proxy_image: str,
) -> tuple[str, str, Path]:  # fmt: skip
    """(network name, server address, CA file) of the test's own outside world."""
    name, address, ca, _ = start_server(
        docker_client, docker_tracker, tmp_path, ["allowed.test", "denied.test"]
    )
    return name, address, ca


def _add_probe_hook(deployment: Deployment, ca: Path) -> None:
    """Give the demo repository a project hook that probes the network."""
    src = deployment.root / "src"
    hooks = src / ".cursor" / "hooks"
    (hooks / "probe.sh").write_text(PROBE)
    (hooks / "probe.sh").chmod(0o755)
    (src / ".cursor" / "ca.pem").write_bytes(ca.read_bytes())
    config = {
        "version": 1,
        "hooks": {"beforeShellExecution": [{"command": ".cursor/hooks/probe.sh"}]},
    }
    (src / ".cursor" / "hooks.json").write_text(json.dumps(config))
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "probe")
    git(deployment.origin, "fetch", "-q", str(src), "main:main")


def _settings(deployment: Deployment, network: str, rules: Path, image: str) -> list[str]:
    config = deployment.root / "egress.toml"
    config.write_text(
        f'[egress]\nproxy_image = "{image}"\noutbound_network = "{network}"\n'
        f'rules_file = "{rules}"\n'
    )
    return [*deployment.flags(), "--config", str(config)]


def _probe(deployment: Deployment, flags: list[str], address: str) -> list[str]:
    payload = deployment.event(
        "beforeShellExecution", command=address, cwd=str(deployment.workspace)
    )
    proc = deployment.run(payload, flags=flags)
    assert proc.returncode == 0, proc.stderr.decode()
    answer: dict[str, Any] = json.loads(proc.stdout)
    hooks = [r for r in deployment.records() if r["kind"] == "hook"]
    last = [(h["outcome"], h["reason"], h.get("stderr_excerpt")) for h in hooks[-1:]]
    assert "user_message" in answer, (answer, last)
    return str(answer["user_message"]).split()


def _cli(*args: str) -> str:
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _proxies(client: docker.DockerClient, tracker: DockerTracker) -> list[Any]:
    found = client.containers.list(
        all=True, filters={"label": [f"cloudrunner.worker={tracker.worker_id}", ROLE_LABEL]}
    )
    for container in found:
        tracker.track(container)
    return list(found)


def test_allowlisted_names_pass_others_are_refused_and_nothing_bypasses_the_proxy(
    deployment: Deployment,
    internet: tuple[str, str, Path],
    proxy_image: str,
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
) -> None:
    network, address, ca = internet
    _add_probe_hook(deployment, ca)
    rules = deployment.root / "egress-rules.toml"
    rules.write_text('[project]\npolicy = "allowlist"\ndomains = ["allowed.test"]\n')
    flags = _settings(deployment, network, rules, proxy_image)
    try:
        # http allowed, http refused (403), https allowed by CONNECT host, and around the
        # proxy: plain HTTP to the IP and raw TCP get nowhere
        assert _probe(deployment, flags, address) == [
            "200",
            "403",
            "200",
            "000",
            "noroute",
        ]
        egress = [r for r in deployment.records() if r["kind"] == "egress"]
        allowed = [r for r in egress if r["decision"] == "allowed"]
        refused = [r for r in egress if r["decision"] == "refused"]
        assert {(r["host"], r["method"]) for r in allowed} >= {
            ("allowed.test", "GET"),
            ("allowed.test", "CONNECT"),
        }
        assert [(r["host"], r["status"]) for r in refused] == [("denied.test", 403)]
        for record in egress:
            assert record["source"] == "project" and record["event"] == "beforeShellExecution"
            assert record["command"] == ".cursor/hooks/probe.sh" and record["hook_id"]
        assert allowed[0]["bytes_to_hook"] > 0

        # a rule change applies to the next request, without a restart
        rules.write_text(
            '[project]\npolicy = "allowlist"\ndomains = ["allowed.test", "denied.test"]\n'
        )
        assert _probe(deployment, flags, address)[:2] == ["200", "200"]

        # the proxy dying is noticed and it is replaced
        (proxy,) = _proxies(docker_client, docker_tracker)
        proxy.kill()
        assert _probe(deployment, flags, address)[:3] == ["200", "200", "200"]
        events = [r for r in deployment.records() if r["kind"] == "egress" and "proxy_event" in r]
        assert events and events[-1]["proxy_event"]["action"] == "replaced"

        # a source on `none` still has no network at all
        rules.write_text('[project]\npolicy = "none"\n')
        assert _probe(deployment, flags, address)[:3] == ["000", "000", "000"]

        # the operator's view: audit query --kind egress, audit stats
        log = [str(deployment.audit_log)]
        query = _cli("audit", "query", "--kind", "egress", "--format", "json", *log)
        hosts = {json.loads(x).get("host") for x in query.splitlines()}
        assert {"allowed.test", "denied.test"} <= hosts
        stats = json.loads(_cli("audit", "stats", "--format", "json", *log))
        assert stats["egress"]["project"]["refused"] == 1
        assert stats["egress"]["project"]["allowed"] >= 6
        assert stats["top_refused_hosts"] == [{"source_host": "project denied.test:80", "count": 1}]
        assert "top refused egress" in _cli("audit", "stats", *log)
    finally:
        _proxies(docker_client, docker_tracker)


def test_runsc_without_a_network_refuses_an_allowlisted_source_clearly(
    deployment: Deployment,
    internet: tuple[str, str, Path],
    proxy_image: str,
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
) -> None:
    network, address, ca = internet
    runtimes = (docker_client.info() or {}).get("Runtimes") or {}
    if "--network=none" not in ((runtimes.get("runsc") or {}).get("runtimeArgs") or []):
        missing("this test needs runsc registered with --network=none (bash scripts/docker-up)")
    _add_probe_hook(deployment, ca)
    rules = deployment.root / "egress-rules.toml"
    rules.write_text('[project]\npolicy = "allowlist"\ndomains = ["allowed.test"]\n')
    flags = _settings(deployment, network, rules, proxy_image)
    config = Path(flags[-1])
    config.write_text(config.read_text() + '\n[sandbox.per_source.project]\nruntime = "runsc"\n')
    try:
        payload = deployment.event(
            "beforeShellExecution", command=address, cwd=str(deployment.workspace)
        )
        proc = deployment.run(payload, flags=flags)
        assert proc.returncode == 0, proc.stderr.decode()
        (hook,) = [r for r in deployment.records() if r["kind"] == "hook"]
        assert hook["outcome"] == "sandbox_error"
        assert "runsc is registered with --network=none" in hook["reason"]
    finally:
        _proxies(docker_client, docker_tracker)


def test_the_daemon_takes_rules_by_api_counts_attempts_and_reports_a_dead_proxy(
    deployment: Deployment,
    internet: tuple[str, str, Path],
    proxy_image: str,
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
) -> None:
    from tests.support.daemon_process import daemon_process

    network, address, ca = internet
    _add_probe_hook(deployment, ca)
    rules = deployment.root / "egress-rules.toml"  # absent: the settings' rules hold
    flags = _settings(deployment, network, rules, proxy_image)
    config = Path(flags[-1])
    config.write_text(
        config.read_text()
        + '\n[egress.project]\npolicy = "allowlist"\ndomains = ["allowed.test"]\n'
    )
    daemon = daemon_process(flags, state=deployment.state, worker_id=docker_tracker.worker_id)
    daemon.start()
    try:
        payload = deployment.event(
            "beforeShellExecution", command=address, cwd=str(deployment.workspace)
        )

        def probe() -> list[str]:
            reply = daemon.event("beforeShellExecution", payload)
            assert reply.status == 200, reply.body
            return str(json.loads(reply.body)["user_message"]).split()

        assert probe()[:3] == ["200", "403", "200"]
        # a rule change by the API holds from the next connection, without a restart
        changed = daemon.call(
            "POST", "/v1/egress/project",
            {"policy": "allowlist", "domains": ["allowed.test", "denied.test"]},
        )  # fmt: skip
        assert changed.status == 200, changed.body
        assert json.loads(changed.body)["project"]["domains"] == ["allowed.test", "denied.test"]
        assert probe()[:2] == ["200", "200"]
        bad = daemon.call("POST", "/v1/egress/project", {"policy": "open"})
        assert bad.status == 400 and b"never get an open network" in bad.body
        metrics = daemon.call("GET", "/metrics").body.decode()
        assert (
            'cloudrunner_egress_attempts_total{decision="refused",source="project"} 1.0' in metrics
        )
        assert re.search(
            r'cloudrunner_egress_attempts_total\{decision="allowed",source="project"\} [1-9]',
            metrics,
        )
        assert daemon.call("GET", "/readyz").status == 200
        (proxy,) = _proxies(docker_client, docker_tracker)
        proxy.kill()
        ready = daemon.call("GET", "/readyz")
        assert ready.status == 503 and b"egress proxy" in ready.body
        assert probe()[:1] == ["200"]  # replaced on the next use
        assert daemon.call("GET", "/readyz").status == 200
        # removed from outside (docker rm -f): not ready, then replaced and recorded
        (proxy,) = _proxies(docker_client, docker_tracker)
        proxy.remove(force=True)
        ready = daemon.call("GET", "/readyz")
        assert ready.status == 503 and b"egress proxy was removed" in ready.body
        assert probe()[:1] == ["200"]
        assert daemon.call("GET", "/readyz").status == 200
        events = [r["proxy_event"] for r in deployment.records() if "proxy_event" in r]
        assert [e["action"] for e in events] == ["replaced", "replaced"], events
        assert "removed" in events[-1]["reason"]
    finally:
        daemon.stop()
        _proxies(docker_client, docker_tracker)
