"""`hook` isolation: a fresh hardened container for every hook run.

create -> read back and attest -> attach -> start -> stream stdin in while reading
stdout/stderr with the caps applied as the bytes arrive -> wait -> remove. A timeout or
an output overflow kills the container at once; OOM is read from the container state;
the container is removed on every path.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import time
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors

from cloudrunner.docker_engine import EngineUnavailable
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox import container_plan, engine, hardening
from cloudrunner.sandbox.base import ExecRequest, ExecResult, SandboxSpec
from cloudrunner.sandbox.docker_stream import STDERR, STDOUT, StreamDemux
from cloudrunner.sandbox.prepared import PreparedSandbox
from cloudrunner.sandbox.sandbox_log import note

_CHUNK = 65536
#: how long the engine may take to report a killed or finished container's state
_WAIT_S = 60


@dataclass
class _Captured:
    stdout: bytearray
    stderr: bytearray
    #: None (ran to the end), "timeout" or "output_overflow"
    stopped: str | None = None


class HookContainerSandbox(PreparedSandbox):
    """Runs every request in its own container; any number of runs may overlap."""

    def __init__(
        self,
        spec: SandboxSpec,
        client: docker.DockerClient | engine.EngineLink | None = None,
        *,
        attestation_extra: dict[str, Any] | None = None,
        message_prefix: str = "",
    ) -> None:
        super().__init__(spec, client, "hook")
        self._count = 0
        self._live: set[str] = set()
        self._extra = dict(attestation_extra or {})
        self._prefix = message_prefix

    def close(self) -> None:
        with self._lock:
            self._closed = True
            live = list(self._live)
        if not live:
            return
        try:
            client = self._link.client()
        except EngineUnavailable:
            return
        for cid in live:
            _remove(client, cid)

    def _plan(self, request: ExecRequest) -> container_plan.ContainerPlan:
        with self._lock:
            self._count += 1
            n = self._count
        profile = self.spec.profile
        user = f"{self._uid}:{self._gid}"
        return container_plan.ContainerPlan(
            image=profile.image,
            runtime=profile.runtime,
            user=user,
            command=["-c", request.command],
            entrypoint=["/bin/sh"],
            env=dict(request.env),
            working_dir=request.cwd,
            mounts=self._mounts,
            limits=profile.limits,
            network=profile.network,
            labels=container_plan.sandbox_labels(self.spec, "hook"),
            name=f"cloudrunner-{self._id}-{n}",
            hook_user=user,
        )

    def run(self, request: ExecRequest) -> ExecResult:
        started = time.monotonic()
        profile = self.spec.profile
        timeout = request.timeout_s or profile.limits.default_timeout_s
        attestation: dict[str, Any] = {"isolation": "hook", **self._extra}
        cid = ""

        def failed(message: str) -> ExecResult:
            return ExecResult(
                None,
                b"",
                b"",
                time.monotonic() - started,
                Outcome.SANDBOX_ERROR,
                _join(self._prefix, message),
                cid[:12],
                attestation,
            )

        with self._lock:
            if self._closed:
                return failed("the sandbox is closed")
        problem = container_plan.cwd_problem(request.cwd, self._mounts)
        if problem:
            return failed(problem)
        plan = self._plan(request)
        try:
            client = self._link.client()
            runtime_problem = engine.runtime_network_problem(
                client, profile.runtime, profile.network
            )
            if runtime_problem:
                return failed(runtime_problem)

            def created(new: str) -> None:
                nonlocal cid
                cid = new
                with self._lock:
                    self._live.add(new)

            _, attested, sock = hardening.create_attached(client, plan, created)
            attestation.update(attested)
            raw: socket.socket = sock._sock
            try:
                client.api.start(cid)
                if self.spec.on_start is not None:
                    self.spec.on_start(cid, request.env)
                run_started = time.monotonic()
                captured = _pump(
                    raw,
                    request.stdin,
                    run_started + timeout,
                    profile.limits.stdout_cap,
                    profile.limits.stderr_cap,
                )
            finally:
                # Closed before any kill: with runsc a kill blocks while the engine is
                # stuck writing output nobody reads.
                _close_socket(raw, sock)
            if captured.stopped is not None:
                with contextlib.suppress(docker.errors.APIError):
                    client.api.kill(cid)
            status = client.api.wait(cid, timeout=_WAIT_S)
            duration = time.monotonic() - run_started
            state = client.api.inspect_container(cid).get("State") or {}
        except hardening.HardeningNotInForce as exc:
            note("error", "sandbox.hardening_refused", sandbox=self._id, problem=exc.message)
            return failed(exc.message)
        except Exception as exc:  # every engine failure is this hook's sandbox_error
            return failed(
                engine.describe(
                    exc,
                    image=profile.image,
                    runtime=profile.runtime,
                    network=profile.network,
                )
            )
        finally:
            if cid:
                with contextlib.suppress(EngineUnavailable):
                    _remove(self._link.client(), cid)
                with self._lock:
                    self._live.discard(cid)
        code = int(status.get("StatusCode", state.get("ExitCode", -1)))
        oom_killed = bool(state.get("OOMKilled"))
        outcome, exit_code, message = _classify(captured, code, oom_killed, timeout)
        return ExecResult(
            exit_code,
            bytes(captured.stdout),
            bytes(captured.stderr),
            duration,
            outcome,
            _join(self._prefix, message),
            cid[:12],
            attestation,
        )


def _join(prefix: str, message: str) -> str:
    return "; ".join(part for part in (prefix, message) if part)


def _classify(
    captured: _Captured, code: int, oom_killed: bool, timeout: float
) -> tuple[Outcome, int | None, str]:
    if captured.stopped == "timeout":
        return Outcome.TIMEOUT, None, f"killed after its timeout of {timeout:g}s"
    if captured.stopped == "output_overflow":
        return Outcome.OUTPUT_OVERFLOW, None, "stdout or stderr went over its cap; killed"
    if oom_killed and code == 137:
        return Outcome.OOM, code, "killed by the memory limit"
    if code == 0:
        return Outcome.OK, 0, ""
    if code > 128:
        return Outcome.ERROR, code, f"killed by signal {code - 128}"
    return Outcome.ERROR, code, ""


def _pump(
    raw: socket.socket, stdin: bytes, deadline: float, stdout_cap: int, stderr_cap: int
) -> _Captured:
    """Feed stdin and collect output until EOF, the deadline or an overflow."""
    captured = _Captured(bytearray(), bytearray())
    demux = StreamDemux()
    pending = memoryview(stdin)
    raw.setblocking(False)
    selector = selectors.DefaultSelector()
    events = selectors.EVENT_READ | (selectors.EVENT_WRITE if pending else 0)
    selector.register(raw, events)
    if not pending:
        raw.shutdown(socket.SHUT_WR)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                captured.stopped = "timeout"
                return captured
            for _key, mask in selector.select(left):
                if mask & selectors.EVENT_WRITE and pending:
                    try:
                        sent = raw.send(pending[:_CHUNK])
                    except BlockingIOError:
                        sent = 0
                    except OSError:
                        pending = pending[len(pending) :]  # the hook closed its stdin
                        sent = 0
                    pending = pending[sent:]
                    if not pending:
                        with contextlib.suppress(OSError):
                            raw.shutdown(socket.SHUT_WR)
                        selector.modify(raw, selectors.EVENT_READ)
                if mask & selectors.EVENT_READ:
                    try:
                        data = raw.recv(_CHUNK)
                    except BlockingIOError:
                        continue
                    if not data:
                        return captured
                    for stream, payload in demux.feed(data):
                        if stream == STDOUT:
                            buf, cap = captured.stdout, stdout_cap
                        elif stream == STDERR:
                            buf, cap = captured.stderr, stderr_cap
                        else:
                            continue
                        room = cap - len(buf)
                        buf += payload[: max(room, 0)]
                        if len(payload) > room:
                            captured.stopped = "output_overflow"
                            return captured
    finally:
        selector.close()


def _close_socket(raw: socket.socket, wrapper: Any) -> None:
    # Closing the SDK's SocketIO wrapper alone leaves the socket open (it is
    # reference-counted), and the engine then blocks writing into it: shut it for real.
    with contextlib.suppress(OSError):
        raw.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        raw.close()
    with contextlib.suppress(OSError):
        wrapper.close()


def _remove(client: docker.DockerClient, cid: str) -> None:
    try:
        client.api.remove_container(cid, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except Exception as exc:  # the reaper removes what could not be removed now
        note("warning", "sandbox.remove_failed", container=cid[:12], error=str(exc)[:200])
