"""Egress for one worker: which network a source's sandbox joins (its own, for an
allowlisted source), the proxy variables of each hook run and the end of its credential,
the rules file that can change the rules without a restart, and the `egress` audit records
of what the proxy saw."""

from __future__ import annotations

import os
import threading
import time
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import docker
from pydantic import ValidationError

from cloudrunner.audit.records import EgressFields
from cloudrunner.egress.access_log import AccessLogReader, record_fields
from cloudrunner.egress.credentials import CredentialIssuer, RunAttribution, user_of
from cloudrunner.egress.proxy import EgressProxy
from cloudrunner.egress.rules import SOURCE_KINDS, EgressSettings
from cloudrunner.errors import CloudrunnerError
from cloudrunner.memo import BoundedMemo
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sandbox.sandbox_log import note

#: how long to wait once for the proxy's last log lines after hooks that used it ran
SETTLE_S = 0.05


#: a sandbox network's name and subnets
_Network = tuple[str, tuple[str, ...]]


class EgressRulesError(CloudrunnerError):
    pass


def read_rules_file(path: Path, base: EgressSettings) -> EgressSettings:
    """`base` with the per-source tables of a rules file (TOML: [project], [team], ...)."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise EgressRulesError(
            f"cannot read the egress rules file {path}: {exc.strerror}"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise EgressRulesError(f"the egress rules file {path} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(SOURCE_KINDS))
    if unknown:
        raise EgressRulesError(
            f"the egress rules file {path} has unknown tables {unknown}; it holds only "
            f"[{'], ['.join(SOURCE_KINDS)}]"
        )
    try:
        return EgressSettings.model_validate({**base.model_dump(), **data})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise EgressRulesError(f"invalid egress rules in {path}: {problems}") from None


class Egress:
    def __init__(
        self,
        settings: EgressSettings,
        *,
        client: Callable[[], docker.DockerClient],
        state_dir: Path,
        worker_id: str,
        rules_file: Path | None = None,
        default_networks: Callable[[SourceKind], str] = lambda kind: "none",
    ) -> None:
        self._base = settings
        self._settings = settings
        self._client = client
        self._state_dir = state_dir
        self._worker_id = worker_id
        self._rules_file = rules_file
        self._rules_stamp: tuple[int, int] | None = None
        self._default_networks = default_networks
        self._lock = threading.Lock()
        self._proxy: EgressProxy | None = None
        self._issuer: CredentialIssuer | None = None
        self._reader: AccessLogReader | None = None
        #: (session, source) -> (network, subnets) of the sandbox networks this process uses
        #: (the oldest forgotten past 4096: asked of the proxy again when next needed)
        self._networks: BoundedMemo[tuple[str, SourceKind], _Network] = BoundedMemo(4096)
        #: a rules-file problem, reported on every event until it is fixed
        self.problem: str | None = None

    # ------------------------------------------------------------------ rules

    @property
    def settings(self) -> EgressSettings:
        self._reload()
        return self._settings

    def _reload(self) -> None:
        path = self._rules_file
        if path is None:
            return
        try:
            st = os.stat(path)
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp == self._rules_stamp:
                return
            self._rules_stamp = stamp
            if stamp is None:
                self._settings, self.problem = self._base, None
                return
            try:
                self._settings, self.problem = read_rules_file(path, self._base), None
            except EgressRulesError as exc:
                # keep the rules in force: a broken edit must not open (or close) anything
                self.problem = f"{exc.message}; the previous rules stay in force"

    def set_rules(self, kind: str, rules: dict[str, Any]) -> EgressSettings:
        """Replace one source's rules (the daemon's API); they hold from the next connection.
        `kind` is the name as the request gave it: the settings model decides whether it
        names a source (an unknown one is its validation error, as for a rules file)."""
        with self._lock:
            try:
                self._settings = EgressSettings.model_validate(
                    {**self._settings.model_dump(), kind: rules}
                )
            except ValidationError as exc:
                raise EgressRulesError(
                    "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                ) from None
            settings = self._settings
        if self._proxy is not None and settings.allowlisted:
            self._proxy.ensure(settings.allowlisted)
        return settings

    def policy(self, kind: SourceKind) -> str:
        return self.settings.rules_for(kind).policy

    # ------------------------------------------------------------------ sandboxes

    def _proxy_for(self) -> EgressProxy:
        with self._lock:
            if self._proxy is None:
                self._proxy = EgressProxy(
                    self._client(),
                    state_dir=self._state_dir,
                    worker_id=self._worker_id,
                    image=self._settings.proxy_image,
                    outbound_network=self._settings.outbound_network,
                    subnets=self._settings.sandbox_subnets,
                    subnet_size=self._settings.sandbox_subnet_size,
                )
                self._issuer = CredentialIssuer(self._proxy.key(), self._proxy.book)
                self._reader = AccessLogReader(self._proxy.log_path)
                self._reader.skip_to_end()
            return self._proxy

    def network_for(self, kind: SourceKind, session: str = "") -> str | None:
        """The network a source's sandbox of one session joins, or None to keep the
        profile's: for an allowlist, an internal network of that sandbox's own, with the
        proxy on it. Raises EgressUnavailable when the proxy cannot be had."""
        settings = self.settings
        policy = settings.rules_for(kind).policy
        if policy == "allowlist":
            return self._sandbox_network(kind, session)[0]
        if policy == "open":
            named = self._default_networks(kind)
            return named if named != "none" else "bridge"
        return None

    def _sandbox_network(self, kind: SourceKind, session: str) -> _Network:
        """The allowlisted source's network of one session and its subnets (made, and the
        proxy on it, when missing), remembered for the session's runs."""
        proxy = self._proxy_for()
        proxy.ensure(self.settings.allowlisted)
        found = proxy.sandbox_network(session, kind)
        self._networks.put((session, kind), found)
        proxy.collect_if_due()
        return found

    def hook_env(
        self, kind: SourceKind, attribution: RunAttribution, *, timeout_s: float,
        issued: list[str] | None = None,
    ) -> dict[str, str]:  # fmt: skip
        """The proxy variables of one hook run of an allowlisted source (else none): a
        credential good from its session's sandbox network for `timeout_s` at most; its user
        name is added to `issued`, whose runs `end` ends."""
        if self.policy(kind) != "allowlist":
            return {}
        self._proxy_for()
        assert self._issuer is not None
        found = self._networks.get((attribution.session, kind))
        network, subnets = found or self._sandbox_network(kind, attribution.session)
        user = self._issuer.issue(
            attribution, network=network, subnets=subnets, lifetime_s=timeout_s
        )
        if issued is not None:
            issued.append(user)
        return self._issuer.environment(user)

    def bind(self, container_id: str, env: Mapping[str, str]) -> None:
        """Tie the credential in a run's `env` to the address of the container it runs in
        (until then it is good from its sandbox's network). A failure leaves it at that,
        and is logged."""
        user = user_of(env.get("HTTP_PROXY", ""))
        if user is None or self._proxy is None:
            return
        try:
            self._proxy.bind(user, container_id)
        except (docker.errors.DockerException, OSError, KeyError) as exc:
            note("warning", "egress.bind_failed", container=container_id[:12], error=str(exc)[:200])

    def end(self, users: list[str]) -> None:
        """End the runs of `users` (their event is over): the proxy refuses their
        credentials from now on."""
        if users and self._proxy is not None:
            self._proxy.book.end(users)

    # ------------------------------------------------------------------ records

    def records(self, used_proxy: bool) -> list[EgressFields]:
        """`egress` record fields for the attempts logged since the last call (and the
        proxy's own events: replaced, ...)."""
        if self._proxy is None or self._reader is None or self._issuer is None:
            return []
        attempts = self._reader.new_attempts()
        if used_proxy:
            time.sleep(SETTLE_S)
            attempts += self._reader.new_attempts()
        out = [record_fields(a, self._proxy.book) for a in attempts]
        with self._lock:
            events, self._proxy.events = self._proxy.events, []
        out += [EgressFields(proxy_event=e) for e in events]
        return out

    def status(self) -> tuple[bool, str]:
        """Readiness: fine when no source needs the proxy, else whether it runs."""
        if self.problem:
            return False, self.problem
        if not self.settings.allowlisted:
            return True, "no source uses the egress proxy"
        return self._proxy_for().status()
