"""Egress tried as a hostile repository's hooks would: IP literals whose reverse DNS names an
allowed host, a credential used after its run or from another sandbox, one session's hook
connecting to another session's container, plain HTTP to port 443, a request without a
credential, and the proxy removed from outside.

The "internet" is one server container on a network this test creates, answering HTTP on
port 80 and HTTPS on 443, reachable as `allowed.test` (a network alias). The engine's
embedded DNS gives its address a reverse name, `<container>.<network>`, that the allowlist
names too: a proxy that decided on a reverse lookup would let its IP through. Nothing here
sends traffic anywhere but to containers this test made.
"""

from __future__ import annotations

import json
import shlex
import textwrap
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from cloudrunner.egress.proxy import EgressProxy
from tests.e2e.conftest import Deployment
from tests.e2e.test_egress import _proxies, proxy_image, start_server
from tests.support.docker_tracking import DockerTracker
from tests.support.git_repos import git
from tests.support.waiting import wait_for

pytestmark = pytest.mark.docker

#: runs the event's `command` as a bash script and answers with what it printed
SHELL_HOOK = textwrap.dedent(
    """\
    #!/bin/bash
    script=$(jq -r .command)
    out=$(bash -c "$script" 2>&1 | tr '\\n' ' ')
    jq -cn --arg m "$out" '{permission: "deny", user_message: $m}'
    """
)
#: `code URL [curl flags]`: the HTTP status through the hook's proxy (000: no answer)
CODE = (
    "code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 \"$@\" || true; }; "
    "connect() { curl -s -o /dev/null -w '%{http_connect}' -k --max-time 10 \"$@\" || true; }; "
)
#: `raw METHOD TARGET`: the proxy's status for a request line written exactly so (curl would
#: rewrite 0x.. and other spellings of an address before sending them)
RAW = r"""raw() { python3 -c 'import base64, os, socket, sys, urllib.parse as u
p = u.urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(f"{u.unquote(p.username)}:{p.password}".encode()).decode()
method, target = sys.argv[1], sys.argv[2]
host = target if method == "CONNECT" else target.split("/")[2]
s = socket.create_connection((p.hostname, p.port), 10)
head = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n"
s.sendall(f"{head}Proxy-Authorization: Basic {auth}\r\n\r\n".encode())
print(s.recv(64).split()[1].decode())' "$@" 2>/dev/null || echo 000; }; """


__all__ = ["proxy_image"]  # a fixture, used through `world`


@dataclass(frozen=True)
class World:
    image: str
    network: str
    address: str
    #: the server's reverse DNS name on `network` (the allowlist names it)
    reverse_name: str


@pytest.fixture
def world(
    docker_client: docker.DockerClient, docker_tracker: DockerTracker, tmp_path: Path,
    proxy_image: str,
) -> World:  # fmt: skip
    name, address, _, server_name = start_server(
        docker_client, docker_tracker, tmp_path, ["allowed.test"]
    )
    return World(proxy_image, name, address, f"{server_name}.{name}")


def _setup(
    deployment: Deployment, world: World, rules: str, *, timeout: int = 30, extra: str = ""
) -> list[str]:
    """The repository's shell hook, the rules file and the flags of `cloudrunner run`."""
    src = deployment.root / "src"
    hooks = src / ".cursor" / "hooks"
    (hooks / "sh.sh").write_text(SHELL_HOOK)
    (hooks / "sh.sh").chmod(0o755)
    config = {
        "version": 1,
        "hooks": {"beforeShellExecution": [{"command": ".cursor/hooks/sh.sh", "timeout": timeout}]},
    }
    (src / ".cursor" / "hooks.json").write_text(json.dumps(config))
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "shell hook")
    git(deployment.origin, "fetch", "-q", str(src), "main:main")
    (deployment.root / "egress-rules.toml").write_text(rules)
    settings = deployment.root / "egress.toml"
    settings.write_text(
        f'[egress]\nproxy_image = "{world.image}"\noutbound_network = "{world.network}"\n'
        f'rules_file = "{deployment.root / "egress-rules.toml"}"\n{extra}'
    )
    return [*deployment.flags(), "--config", str(settings)]


def _run_script(
    deployment: Deployment, flags: list[str], script: str, conversation: str = "conv-1"
) -> str:
    """`script` run by the repository's shell hook; what it printed."""
    payload = deployment.shell_event(
        script, conversation_id=conversation, generation_id=f"gen-{uuid.uuid4().hex[:6]}"
    )
    proc = deployment.run(payload, flags=flags)
    assert proc.returncode == 0, proc.stderr.decode()
    answer: dict[str, Any] = json.loads(proc.stdout)
    hooks = [r for r in deployment.records() if r["kind"] == "hook"]
    assert "user_message" in answer, (answer, [(h["outcome"], h["reason"]) for h in hooks[-1:]])
    return str(answer["user_message"])


def _egress(deployment: Deployment) -> list[dict[str, Any]]:
    return [r for r in deployment.records() if r["kind"] == "egress" and "decision" in r]


def _allow(world: World, *, addresses: tuple[str, ...] = ()) -> str:
    return (
        '[project]\npolicy = "allowlist"\n'
        f'domains = ["allowed.test", "{world.reverse_name}"]\n'
        + (f"addresses = {json.dumps(list(addresses))}\n" if addresses else "")
    )


def _forms(address: str) -> dict[str, str]:
    """Spellings of one IPv4 address that a resolver (and Squid) takes as that address."""
    parts = [int(p) for p in address.split(".")]
    number = (parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]
    return {
        "dotted": address,
        "decimal": str(number),
        "hex": hex(number),
        "octal": ".".join(f"0{p:o}" for p in parts),
        "mapped": f"[::ffff:{address}]",
    }


def test_ip_literals_pass_only_when_listed_and_plain_http_only_to_port_80(
    deployment: Deployment,
    world: World,
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
) -> None:
    flags = _setup(deployment, world, _allow(world))
    forms = _forms(world.address)
    try:
        # the server's own name passes; its address does not, in any spelling, though
        # its reverse DNS name is on the list
        script = CODE + RAW + "echo name=$(code http://allowed.test/); "
        script += "".join(f"echo {k}=$(raw GET http://{v}/); " for k, v in forms.items())
        script += f"echo connect=$(raw CONNECT {world.address}:443); "
        script += f"echo tls=$(connect https://{world.address}/); "
        script += "echo port443=$(code http://allowed.test:443/); "
        script += "echo port8080=$(code http://allowed.test:8080/); "
        script += (
            "echo nocred=$(env -u HTTP_PROXY -u http_proxy curl -s -o /dev/null "
            "-w '%{http_code}' --max-time 10 -x http://cloudrunner-egress-proxy:3128 "
            "http://allowed.test/)"
        )
        seen = dict(part.split("=", 1) for part in _run_script(deployment, flags, script).split())
        assert seen == {
            "name": "200", **{k: "403" for k in forms}, "connect": "403", "tls": "403",
            "port443": "403", "port8080": "403", "nocred": "407",
        }, seen  # fmt: skip
        records = _egress(deployment)
        literal = [r for r in records if r["host"].strip("[]") == world.address]
        assert literal and all(r["decision"] == "refused" for r in literal)
        assert {(r["method"], r["port"]) for r in literal} >= {("GET", 80), ("CONNECT", 443)}
        for record in literal:
            assert record["source"] == "project" and record["conversation_id"] == "conv-1"
        (plain443,) = [r for r in records if r["port"] == 443 and r["method"] == "GET"]
        assert plain443["decision"] == "refused" and plain443["status"] == 403
        # without a credential: still the session and source it came from, not `unknown`
        (bare,) = [r for r in records if r["status"] == 407]
        assert bare["decision"] == "refused" and bare["source"] == "project"
        assert bare["session"] == "conv-1" and bare["used_from"]["source"] == "project"
        assert bare["conversation_id"] == "conv-1" and bare["hook_id"]

        # the operator lists the address: it passes, in any spelling of that address (Squid
        # reads each as the same address), and nothing else does
        (deployment.root / "egress-rules.toml").write_text(
            _allow(world, addresses=(world.address,))
        )
        script = RAW + "".join(f"echo {k}=$(raw GET http://{v}/); " for k, v in forms.items())
        script += f"echo other=$(raw GET http://{world.address.rsplit('.', 1)[0]}.254/)"
        seen = dict(part.split("=", 1) for part in _run_script(deployment, flags, script).split())
        assert seen == {**{k: "200" for k in forms}, "other": "403"}, seen
    finally:
        _proxies(docker_client, docker_tracker)


def test_a_credential_dies_with_its_run_and_names_the_run_it_was_stolen_from(
    deployment: Deployment,
    world: World,
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
) -> None:
    # sandbox networks from a range of the operator's, a small one each
    flags = _setup(deployment, world, _allow(world), extra='sandbox_subnets = "10.213.0.0/16"\n')
    try:
        # run 1 of conversation A uses its credential, then leaks it (here: in its answer)
        out = _run_script(
            deployment, flags, CODE + 'echo $(code http://allowed.test/) "$HTTPS_PROXY"', "conv-A"
        )
        status, stolen = out.split()
        assert status == "200" and stolen.startswith("http://project.")
        # a later run of conversation B uses it: refused, and recorded as a reuse
        script = CODE + f"echo $(code -x {shlex.quote(stolen)} http://allowed.test/)"
        assert _run_script(deployment, flags, script, "conv-B").split() == ["403"]
        reuse = [r for r in _egress(deployment) if r.get("credential_run")]
        assert len(reuse) == 1, reuse
        (record,) = reuse
        assert record["decision"] == "refused" and record["refusal"] == "not-live"
        assert record["credential_run"]["conversation_id"] == "conv-A"
        assert record["session"] == "conv-B" and record["source"] == "project"
        assert [r["conversation_id"] for r in record["used_from"]["runs"]] == ["conv-B"]
        for name in {r["used_from"]["network"] for r in reuse}:
            (config,) = docker_client.networks.get(name).attrs["IPAM"]["Config"]
            assert config["Subnet"].startswith("10.213.") and config["Subnet"].endswith("/28")

        # the sessions' networks, idle (no container, no live credential), are removed
        proxy = EgressProxy(
            docker_client, state_dir=deployment.state, worker_id=docker_tracker.worker_id,
            image=world.image, outbound_network=world.network,
        )  # fmt: skip
        networks = {r["used_from"]["network"] for r in reuse} | {
            proxy.network_name("conv-A", "project")
        }
        assert networks <= set(proxy.collect_networks(idle_s=0.0))
        assert _proxies(docker_client, docker_tracker)[0].status == "running"

        # the proxy removed from outside: the next run starts another and says so
        (proxy,) = _proxies(docker_client, docker_tracker)
        proxy.remove(force=True)
        assert _run_script(
            deployment, flags, CODE + "echo $(code http://allowed.test/)"
        ).split() == ["200"]
        events = [r["proxy_event"] for r in deployment.records() if "proxy_event" in r]
        assert events and events[-1]["action"] == "replaced", events
        assert "removed" in events[-1]["reason"]
    finally:
        _proxies(docker_client, docker_tracker)


def test_one_session_cannot_reach_another_sessions_sandbox_or_use_its_credential(
    deployment: Deployment,
    world: World,
    docker_client: docker.DockerClient,
    docker_tracker: DockerTracker,
) -> None:
    flags = _setup(deployment, world, _allow(world), timeout=90)
    # session B works in a checkout of its own beside A's, with the same worker state
    other = deployment.root / "workspace-b"
    flags_b = list(flags)
    flags_b[flags_b.index(str(deployment.workspace))] = str(other)
    info, done = deployment.workspace / ".a-info", deployment.workspace / ".b-done"
    listen = (
        "python3 -c 'import socket,time\n"
        's=socket.socket(); s.bind(("0.0.0.0", 8000)); s.listen(8)\n'
        'while True: c,_=s.accept(); c.sendall(b"from-a"); c.close()\' & srv=$!; '
    )
    script_a = (
        CODE + listen + "sleep 0.5; "
        f'echo "$(hostname -i | cut -d" " -f1) $HTTPS_PROXY" > {info.name}; '
        f"for i in $(seq 800); do [ -e {done.name} ] && break; sleep 0.1; done; "
        "echo a-proxy=$(code http://allowed.test/); kill $srv"
    )
    result: dict[str, str] = {}

    def session_a() -> None:
        result["a"] = _run_script(deployment, flags, script_a, "conv-A")

    a = threading.Thread(target=session_a)
    a.start()
    try:
        wait_for(
            lambda: info.exists() and len(info.read_text().split()) == 2,
            "session A writing its address and credential", timeout_s=60,
        )  # fmt: skip
        address, credential = info.read_text().split()
        payload = deployment.event(
            "beforeShellExecution", cwd=str(other), conversation_id="conv-B",
            workspace_roots=[str(other)],
            command=(
                CODE  # the direct try waits out its timeout while the rest run
                + f"exec 4< <(timeout 5 bash -c 'exec 3<>/dev/tcp/{address}/8000 && "
                "head -c 6 <&3' 2>/dev/null || echo none); "
                f"echo via-proxy=$(code http://{address}:8000/); "
                f"echo stolen=$(code -x {shlex.quote(credential)} http://allowed.test/); "
                "echo b-proxy=$(code http://allowed.test/); echo tcp=$(cat <&4)"
            ),
        )  # fmt: skip
        proc = deployment.run(payload, flags=flags_b)
        assert proc.returncode == 0, proc.stderr.decode()
        seen = dict(p.split("=", 1) for p in json.loads(proc.stdout)["user_message"].split())
        # a container of A's own session and source (another checkout) may not use it either
        payload = {
            **payload, "conversation_id": "conv-A",
            "command": CODE + f"echo $(code -x {shlex.quote(credential)} http://allowed.test/) "
            "$(code http://allowed.test/)",
        }  # fmt: skip
        sibling = deployment.run(payload, flags=flags_b)
        assert sibling.returncode == 0, sibling.stderr.decode()
        assert json.loads(sibling.stdout)["user_message"].split() == ["403", "200"]
        done.touch()
        a.join(timeout=120)
        # B reaches neither A's container (any port: no route) nor A through the proxy,
        # and A's live credential is refused from B's sandbox; the proxy works for both
        assert seen == {"tcp": "none", "via-proxy": "403", "stolen": "403", "b-proxy": "200"}
        assert result["a"].split() == ["a-proxy=200"]
        records = _egress(deployment)
        stolen, by_sibling = [r for r in records if r.get("credential_run")]
        assert stolen["refusal"] == by_sibling["refusal"] == "wrong-source"
        assert stolen["credential_run"]["conversation_id"] == "conv-A"
        assert stolen["session"] == "conv-B" and by_sibling["session"] == "conv-A"
        (cross,) = [r for r in records if r["host"] == address]
        assert cross["decision"] == "refused" and cross["session"] == "conv-B"
    finally:
        if deployment.workspace.exists():
            done.touch()
        a.join(timeout=120)
        _proxies(docker_client, docker_tracker)
