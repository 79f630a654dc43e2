"""The egress proxy container and the internal networks behind it, supervised by the worker.

One proxy per worker identity and state directory, reused across `cloudrunner run`
processes and daemon restarts. Each sandbox of an allowlisted source (one per session and
source) sits on an internal Docker network of its own (no route out, no other sandbox on
it) where the proxy is reachable as `cloudrunner-egress-proxy`; the proxy joins every such
network and is alone on the outbound network. Its configuration (squid.conf, the credential
key, the live grants) and its access log live under `<state_dir>/egress/`. A proxy that died
or was removed is noticed on the next use and replaced; a configuration change is applied
with a reconfigure (SIGHUP), so new rules hold from the next connection without a restart.
A sandbox network nobody used for `NETWORK_IDLE_S` is removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import os
import secrets
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types

from cloudrunner.egress.grants import GrantBook
from cloudrunner.egress.rules import PROXY_HOST, EgressRules, squid_config
from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sandbox.base import WORKER_LABEL

ROLE_LABEL = "cloudrunner.role"
PROXY_ROLE = "egress-proxy"
NETWORK_ROLE = "egress-network"
SESSION_LABEL = "cloudrunner.egress.session"
SOURCE_LABEL = "cloudrunner.egress.source"
#: a sandbox network without containers or live credentials, unused this long, is removed
NETWORK_IDLE_S = 120.0
#: how often (at most) the worker processes of a state directory look for such networks
COLLECT_EVERY_S = 60.0
_CONF_IN_CONTAINER = "/etc/cloudrunner-egress"
_LOG_IN_CONTAINER = "/var/log/cloudrunner-egress"
_HELPER = "/opt/cloudrunner-egress/check_credentials.py"
_GRANT_HELPER = "/opt/cloudrunner-egress/check_grant.py"
_READY_TEXT = b"Accepting HTTP Socket connections"
START_TIMEOUT_S = 30.0


class EgressUnavailable(CloudrunnerError):
    """The egress proxy cannot be had (the message names the fix)."""


class EgressProxy:
    def __init__(
        self,
        client: docker.DockerClient,
        *,
        state_dir: Path,
        worker_id: str,
        image: str,
        outbound_network: str,
        subnets: str | None = None,
        subnet_size: int = 28,
    ) -> None:
        self.client = client
        self.image = image
        self.outbound_network = outbound_network
        #: where each sandbox network's range is taken from (None: the engine's pools)
        self.subnets = ipaddress.IPv4Network(subnets) if subnets else None
        self.subnet_size = subnet_size
        self.worker_id = worker_id
        self.directory = state_dir / "egress"
        suffix = hashlib.sha256(f"{worker_id}\n{state_dir.resolve()}".encode()).hexdigest()[:12]
        self.network_prefix = f"cloudrunner-egress-{suffix}"
        self.container_name = f"cloudrunner-egress-proxy-{suffix}"
        self._lock = threading.Lock()
        self._config: str | None = None
        self.book = GrantBook(self.directory)
        #: (container, network) -> the container's address there (a session container's
        #: stays the same for its life)
        self._addresses: dict[tuple[str, str], str] = {}
        #: what happened to the proxy that the audit log should say (replaced, ...)
        self.events: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ files

    @property
    def log_path(self) -> Path:
        return self.directory / "log" / "access.log"

    @property
    def key_path(self) -> Path:
        return self.directory / "conf" / "key"

    def key(self) -> bytes:
        """The credential key, made once (random, 32 bytes) and kept beside the config."""
        conf = self.directory / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        try:
            return self.key_path.read_bytes().strip()
        except FileNotFoundError:
            pass
        key = secrets.token_hex(32).encode()
        tmp = conf / f".key-{os.getpid()}"
        # readable inside the container by the proxy user; the 0700 directory keeps host
        # users out (a bind mount of a file is resolved by the engine, not by that user)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key + b"\n")
        try:
            os.link(tmp, self.key_path)  # first writer wins across processes
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        return self.key_path.read_bytes().strip()

    def _write_config(self, rules: Mapping[SourceKind, EgressRules]) -> bool:
        """Write squid.conf for `rules`; True when it changed."""
        text = squid_config(
            rules,
            log_path=f"{_LOG_IN_CONTAINER}/access.log",
            key_path=f"{_CONF_IN_CONTAINER}/key",
            helper=_HELPER,
            grant_helper=_GRANT_HELPER,
            grants_path=f"{_CONF_IN_CONTAINER}/grants.json",
        )
        path = self.directory / "conf" / "squid.conf"
        try:
            if path.read_text() == text:
                self._config = text
                return False
        except FileNotFoundError:
            pass
        tmp = path.with_name(f".squid.conf-{os.getpid()}-{threading.get_ident()}")
        tmp.write_text(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        self._config = text
        return True

    # ------------------------------------------------------------------ engine

    def _labels(self) -> dict[str, str]:
        return {WORKER_LABEL: self.worker_id, ROLE_LABEL: PROXY_ROLE}

    @property
    def _marker(self) -> Path:
        """The id of the last proxy this state directory started (a removed one is noticed)."""
        return self.directory / "proxy.id"

    def network_name(self, session: str, kind: SourceKind) -> str:
        digest = hashlib.sha256(f"{session}\0{kind}".encode()).hexdigest()[:12]
        return f"{self.network_prefix}-{digest}"

    def sandbox_network(self, session: str, kind: SourceKind) -> tuple[str, tuple[str, ...]]:
        """(name, subnets) of the internal network of one session's sandbox of one source,
        made on first use, with the proxy on it. Raises EgressUnavailable."""
        name = self.network_name(session, kind)
        try:
            with self.book.locked():
                network = self._sandbox_network(name, session, kind)
                (self.directory / "networks").mkdir(exist_ok=True)
                (self.directory / "networks" / name).touch()
        except docker.errors.APIError as exc:
            raise EgressUnavailable(f"the sandbox's egress network cannot be made: {exc}") from None
        subnets = _subnets(network)
        if not subnets:
            raise EgressUnavailable(f"the egress network {name} has no subnet the engine reports")
        return name, subnets

    def _sandbox_network(self, name: str, session: str, kind: SourceKind) -> Any:
        try:
            network = self.client.networks.get(name)
        except docker.errors.NotFound:
            labels = {
                **self._labels(), ROLE_LABEL: NETWORK_ROLE,
                SESSION_LABEL: session[:200], SOURCE_LABEL: kind.value,
            }  # fmt: skip
            network = self._create(name, labels)
            network.reload()
        container = self._container()
        if container is None:
            raise EgressUnavailable("the egress proxy is gone; the next hook starts it again")
        if container.id not in (network.attrs.get("Containers") or {}):
            try:
                self.client.api.connect_container_to_network(
                    str(container.id), str(network.id), aliases=[PROXY_HOST]
                )
            except docker.errors.APIError as exc:
                if "already exists" not in str(exc):
                    raise
        return network

    def _create(self, name: str, labels: dict[str, str]) -> Any:
        """A new internal network: from the engine's pools, or from the first free range of
        `subnets` (one the engine already uses elsewhere is skipped)."""
        if self.subnets is None:
            return self.client.networks.create(
                name, driver="bridge", internal=True, labels=labels, check_duplicate=True
            )
        taken = {
            ipaddress.ip_network(subnet, strict=False)
            for listed in self.client.networks.list()
            for subnet in _subnets(listed)
        }
        for candidate in self.subnets.subnets(new_prefix=self.subnet_size):
            if any(candidate.overlaps(t) for t in taken):
                continue
            ipam = docker.types.IPAMConfig(
                pool_configs=[docker.types.IPAMPool(subnet=str(candidate))]
            )
            try:
                return self.client.networks.create(
                    name, driver="bridge", internal=True, labels=labels, ipam=ipam,
                    check_duplicate=True,
                )  # fmt: skip
            except docker.errors.APIError as exc:
                if "overlap" not in str(exc).lower():
                    raise
                taken.add(candidate)  # made by someone else meanwhile: the next one
        raise EgressUnavailable(
            f"no free /{self.subnet_size} range is left in egress.sandbox_subnets "
            f"{self.subnets} for another sandbox network; widen it, or wait for idle ones to "
            "be removed"
        )

    def bind(self, user: str, container_id: str) -> None:
        """Narrow `user`'s live grant to the address of the container on its network."""
        grant = self.book.lookup(user)
        if grant is None or grant.ended is not None:
            return
        key = (container_id, grant.network)
        address = self._addresses.get(key)
        if address is None:
            inspected = self.client.api.inspect_container(container_id)
            networks = inspected["NetworkSettings"]["Networks"]
            address = str((networks.get(grant.network) or {}).get("IPAddress") or "")
            if len(self._addresses) > 1024:
                self._addresses.clear()
            self._addresses[key] = address
        if address:
            self.book.narrow(user, f"{address}/32")

    def collect_if_due(self) -> list[str]:
        """`collect_networks` when no process of this state directory did for a while."""
        stamp = self.directory / "networks" / ".collected"
        try:
            if time.time() - stamp.stat().st_mtime < COLLECT_EVERY_S:
                return []
        except FileNotFoundError:
            stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
        return self.collect_networks()

    def collect_networks(self, idle_s: float = NETWORK_IDLE_S) -> list[str]:
        """Remove the sandbox networks no container but the proxy is on and that nobody
        used for `idle_s`; the names removed."""
        removed: list[str] = []
        found = self.client.networks.list(
            filters={"label": [f"{WORKER_LABEL}={self.worker_id}", f"{ROLE_LABEL}={NETWORK_ROLE}"]}
        )
        proxy = self._container()
        now = time.time()
        for listed in found:
            name = str(listed.name)
            if not name.startswith(self.network_prefix + "-"):
                continue
            stamp = self.directory / "networks" / name
            with self.book.locked():
                # a network with no use stamp (its maker died before writing one) counts as
                # idle: it is removed below only when no container but the proxy is on it
                with contextlib.suppress(FileNotFoundError):
                    if now - stamp.stat().st_mtime < idle_s:
                        continue
                try:
                    listed.reload()
                except docker.errors.NotFound:
                    continue
                members = set(listed.attrs.get("Containers") or {})
                if proxy is not None:
                    members.discard(proxy.id)
                if members or self.book.live_on(_subnets(listed)):
                    continue
                with contextlib.suppress(docker.errors.APIError):
                    if proxy is not None and proxy.id in (listed.attrs.get("Containers") or {}):
                        self.client.api.disconnect_container_from_network(
                            str(proxy.id), str(listed.id), force=True
                        )
                    listed.remove()
                    removed.append(name)
                    stamp.unlink(missing_ok=True)
        return removed

    def _container(self) -> Any | None:
        try:
            return self.client.containers.get(self.container_name)
        except docker.errors.NotFound:
            return None

    def ensure(self, rules: Mapping[SourceKind, EgressRules]) -> None:
        """A running proxy enforcing `rules`. Raises EgressUnavailable naming the fix."""
        # one process at a time (of all that share this state directory): a proxy that is
        # gone is started, and its replacement recorded, once
        with self._lock, self.book.locked():
            try:
                self.key()
                (self.directory / "log").mkdir(parents=True, exist_ok=True)
                os.chmod(self.directory / "log", 0o777)  # squid writes it as uid 13
                changed = self._write_config(rules)
                self.book.prepare()
                container = self._container()
                if container is not None and container.status != "running":
                    self.events.append(
                        {"action": "replaced", "container": container.short_id,
                         "reason": f"the egress proxy was {container.status}"}
                    )  # fmt: skip
                    with contextlib.suppress(docker.errors.NotFound):
                        container.remove(force=True)
                    container = None
                elif container is None and self._marker.exists():
                    self.events.append(
                        {"action": "replaced", "container": self._marker.read_text().strip()[:12],
                         "reason": "the egress proxy was removed (not by this worker)"}
                    )  # fmt: skip
                if container is None:
                    self._start()
                elif changed:
                    self._reconfigure(str(container.id))
            except docker.errors.ImageNotFound:
                raise EgressUnavailable(
                    f"the egress proxy image {self.image} is not on this engine; build it with "
                    "`cloudrunner images build`"
                ) from None
            except docker.errors.APIError as exc:
                raise EgressUnavailable(f"the egress proxy cannot be started: {exc}") from None

    def _start(self) -> None:
        conf = self.directory / "conf"
        host_config = self.client.api.create_host_config(
            network_mode=self.outbound_network,
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            tmpfs={
                "/tmp": "rw,nosuid,nodev,size=16m",
                "/var/spool/squid": "rw,nosuid,nodev,size=16m",
                "/run": "rw,nosuid,nodev,size=1m",
            },
            mem_limit=256 * 1024 * 1024,
            pids_limit=256,
            restart_policy={"Name": "no"},
            binds={
                str(conf): {"bind": _CONF_IN_CONTAINER, "mode": "ro"},
                str(self.directory / "log"): {"bind": _LOG_IN_CONTAINER, "mode": "rw"},
            },
        )  # fmt: skip
        created = self.client.api.create_container(
            self.image, name=self.container_name, labels=self._labels(), host_config=host_config,
        )  # fmt: skip
        cid = str(created["Id"])
        try:
            self.client.api.start(cid)
            self._wait_ready(cid)
            tmp = self._marker.with_name(f".proxy.id-{os.getpid()}")
            tmp.write_text(cid + "\n")
            os.replace(tmp, self._marker)
        except BaseException:
            with contextlib.suppress(docker.errors.APIError):
                self.client.api.remove_container(cid, force=True)
            raise

    def _reconfigure(self, cid: str) -> None:
        """SIGHUP: squid re-reads its configuration without a restart. It stops listening
        for the moment it takes, so this returns once it listens again (new rules hold from
        the next connection, and that connection is not refused)."""
        before = self.client.api.logs(cid, stdout=True, stderr=True).count(_READY_TEXT)
        self.client.api.kill(cid, signal="SIGHUP")
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.client.api.logs(cid, stdout=True, stderr=True).count(_READY_TEXT) > before:
                return
            time.sleep(0.05)
        raise EgressUnavailable(
            f"the egress proxy did not take its new rules within {START_TIMEOUT_S:g} s"
        )

    def _wait_ready(self, cid: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            state = self.client.api.inspect_container(cid).get("State") or {}
            logs = self.client.api.logs(cid, stdout=True, stderr=True)
            if _READY_TEXT in logs:
                return
            if not state.get("Running"):
                tail = logs.decode(errors="replace").strip().splitlines()[-5:]
                raise EgressUnavailable(
                    f"the egress proxy exited at start (exit {state.get('ExitCode')}): "
                    + " | ".join(tail)
                )
            time.sleep(0.1)
        raise EgressUnavailable(f"the egress proxy did not start within {START_TIMEOUT_S:g} s")

    def status(self) -> tuple[bool, str]:
        """(running, what to say about it) for readiness checks."""
        try:
            container = self._container()
        except docker.errors.DockerException as exc:
            return False, f"cannot ask the engine about the egress proxy: {exc}"
        if container is None and self._marker.exists():
            return False, "the egress proxy was removed; it is replaced on next use"
        if container is None:  # not started yet: the first hook that needs it starts it
            return True, "the egress proxy starts with the first hook that needs it"
        if container.status != "running":
            return False, f"the egress proxy is {container.status}; it is replaced on next use"
        return True, f"the egress proxy {container.short_id} is running"

    def remove(self) -> None:
        """Remove the proxy container and its networks (an operator's clean-up, tests)."""
        with contextlib.suppress(docker.errors.NotFound):
            self.client.api.remove_container(self.container_name, force=True)
        self._marker.unlink(missing_ok=True)
        self.collect_networks(idle_s=0.0)


def _subnets(network: Any) -> tuple[str, ...]:
    """The subnets of a network as the engine reports them."""
    configs = (network.attrs.get("IPAM") or {}).get("Config") or ()
    return tuple(str(c["Subnet"]) for c in configs if c.get("Subnet"))
