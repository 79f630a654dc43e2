"""`session` isolation: one warm container running the agent, many hook runs.

The container's attached stdin/stdout carry the framed protocol (`framing`); one reader
thread per container demultiplexes results to the waiting `run()` calls, so any number of
threads may run hooks at once. A container whose agent dies, or does not answer within
the request's timeout plus a grace period (wedged), is killed and removed; the hooks in
flight get sandbox_error (or oom, when the memory limit killed the container), and the
next run starts a new container.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors

from cloudrunner.docker_engine import EngineUnavailable
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox import engine, framing, hardening, plan
from cloudrunner.sandbox.base import ExecRequest, ExecResult, SandboxSpec
from cloudrunner.sandbox.diagnostics import note
from cloudrunner.sandbox.docker_stream import STDERR, STDOUT, StreamDemux
from cloudrunner.sandbox.hook_container import HookContainerSandbox
from cloudrunner.sandbox.prepared import PreparedSandbox

#: runtimes whose kernel shields a namespace's PID 1 from the signals of its members, so
#: the agent may posix_spawn hooks (see agent.py); elsewhere it forks each one
SPAWN_RUNTIMES = frozenset({"runc"})


def agent_argv(runtime: str) -> list[str]:
    """How the container starts the agent: isolated mode (no PYTHON* variables, no user
    site), no site module (faster), no .pyc writes (the root is read-only anyway)."""
    spawn = runtime in SPAWN_RUNTIMES
    return [
        "-I",
        "-S",
        "-B",
        "-c",
        f"import sys; sys.path.insert(0, {plan.AGENT_ROOT!r}); "
        f"from cloudrunner.sandbox.agent import main; raise SystemExit(main(spawn={spawn}))",
    ]


_OUTCOMES = {
    "ok": Outcome.OK,
    "error": Outcome.ERROR,
    "timeout": Outcome.TIMEOUT,
    "output_overflow": Outcome.OUTPUT_OVERFLOW,
    "oom": Outcome.OOM,
    "spawn_error": Outcome.SANDBOX_ERROR,
}
_STDERR_TAIL = 4096


class AgentUnavailable(Exception):
    """The agent container could not be started (message names the fix)."""

    def __init__(self, message: str, *, no_python: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.no_python = no_python


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    frame: framing.Frame | None = None
    failure: tuple[Outcome, str] | None = None


class _AgentContainer:
    """One generation of the session's container and its channel."""

    def __init__(
        self,
        client: docker.DockerClient,
        cid: str,
        sock: Any,
        max_body: int,
        attestation: dict[str, Any],
    ) -> None:
        self.client = client
        self.cid = cid
        self.short_id = cid[:12]
        self._sock = sock
        self._raw: socket.socket = sock._sock
        self._decoder = framing.FrameDecoder(max_body=max_body)
        self._demux = StreamDemux()
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self.hello: dict[str, Any] | None = None
        self.hello_seen = threading.Event()
        self.dead: str | None = None
        #: the container's exit code, once the channel closed and the engine told it
        self.exit_code: int | None = None
        self.gone = threading.Event()
        self.attestation = attestation
        self._stderr_tail = b""
        self._reader = threading.Thread(
            target=self._read_loop, name=f"cloudrunner-agent-{self.short_id}", daemon=True
        )

    def start_reading(self) -> None:
        self._reader.start()

    @property
    def stderr_tail(self) -> str:
        return self._stderr_tail.decode("utf-8", "replace").strip()

    def submit(self, meta: dict[str, Any], body: bytes) -> _Pending:
        pending = _Pending()
        with self._lock:
            if self.dead is not None:
                pending.failure = (Outcome.SANDBOX_ERROR, self.dead)
                pending.done.set()
                return pending
            meta["id"] = next(self._ids)
            data = framing.encode(meta, body)
            self._pending[meta["id"]] = pending
        try:
            with self._write_lock:
                self._raw.sendall(data)
        except OSError as exc:
            self.fail(f"could not send the request to the session agent ({exc})")
        return pending

    def forget(self, pending: _Pending) -> None:
        with self._lock:
            for key, value in list(self._pending.items()):
                if value is pending:
                    del self._pending[key]

    def fail(self, reason: str, outcome: Outcome = Outcome.SANDBOX_ERROR) -> None:
        """Mark this container dead and answer every hook in flight."""
        with self._lock:
            if self.dead is None:
                self.dead = reason
            pending, self._pending = self._pending, {}
        for p in pending.values():
            p.failure = (outcome, reason)
            p.done.set()
        self.hello_seen.set()

    def _read_loop(self) -> None:
        try:
            while True:
                data = self._raw.recv(65536)
                if not data:
                    break
                for stream, payload in self._demux.feed(data):
                    if stream == STDOUT:
                        for frame in self._decoder.feed(payload):
                            self._dispatch(frame)
                    elif stream == STDERR:
                        self._stderr_tail = (self._stderr_tail + payload)[-_STDERR_TAIL:]
        except framing.FramingError as exc:
            self.fail(f"the session agent sent an unreadable frame ({exc}); it is replaced")
        except OSError:
            pass
        finally:
            self._ended()

    def _dispatch(self, frame: framing.Frame) -> None:
        op = frame.meta.get("op")
        if op == framing.OP_HELLO:
            self.hello = frame.meta
            self.hello_seen.set()
            return
        if op == framing.OP_RESULT:
            with self._lock:
                pending = self._pending.pop(frame.meta.get("id"), None)  # type: ignore[arg-type]
            if pending is not None:
                pending.frame = frame
                pending.done.set()

    def _ended(self) -> None:
        """The channel closed: the agent or its container is gone."""
        outcome, reason = Outcome.SANDBOX_ERROR, self.dead
        if reason is None:
            state: dict[str, Any] = {}
            with contextlib.suppress(Exception):
                self.client.api.wait(self.cid, timeout=10)
                state = self.client.api.inspect_container(self.cid).get("State") or {}
            code = state.get("ExitCode")
            self.exit_code = code if isinstance(code, int) else None
            if state.get("OOMKilled"):
                outcome = Outcome.OOM
                reason = (
                    "the memory limit killed the session container while this hook ran; "
                    "it is replaced for the next event"
                )
            else:
                tail = self.stderr_tail
                reason = (
                    f"the session agent's container {self.short_id} ended "
                    f"(exit {state.get('ExitCode', 'unknown')})"
                    + (f": {tail[-300:]}" if tail else "")
                    + "; it is replaced for the next event"
                )
        self.fail(reason, outcome)
        self.gone.set()

    def shut(self) -> None:
        """Close the channel (the agent then kills its hooks and exits) and remove."""
        with contextlib.suppress(OSError):
            self._raw.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._raw.close()
        with contextlib.suppress(OSError):
            self._sock.close()
        try:
            self.client.api.remove_container(self.cid, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except Exception as exc:  # the reaper removes it later
            note("warning", "sandbox.remove_failed", container=self.short_id, error=str(exc)[:200])


class SessionSandbox(PreparedSandbox):
    """A warm container per (session, source); thread-safe; replaced when it fails."""

    def __init__(
        self,
        spec: SandboxSpec,
        client: docker.DockerClient | engine.EngineLink | None = None,
        *,
        start_timeout_s: float = 60.0,
        wedge_grace_s: float = 15.0,
    ) -> None:
        super().__init__(spec, client, "session")
        self._generation = 0
        self._current: _AgentContainer | None = None
        self._fallback: HookContainerSandbox | None = None
        self._start_timeout = start_timeout_s
        self._grace = wedge_grace_s

    @property
    def container_id(self) -> str | None:
        """The current agent container's id (None before the first run or after a failure)."""
        current = self._current
        return current.cid if current is not None and current.dead is None else None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            current, self._current = self._current, None
            fallback = self._fallback
        if current is not None:
            current.fail("the session sandbox was closed")
            current.shut()
        if fallback is not None:
            fallback.close()

    # -- running ---------------------------------------------------------------

    def run(self, request: ExecRequest) -> ExecResult:
        started = time.monotonic()
        limits = self.spec.profile.limits
        timeout = request.timeout_s or limits.default_timeout_s

        def failed(
            message: str,
            sandbox_id: str = "",
            outcome: Outcome = Outcome.SANDBOX_ERROR,
            attestation: dict[str, Any] | None = None,
        ) -> ExecResult:
            return ExecResult(
                None,
                b"",
                b"",
                time.monotonic() - started,
                outcome,
                message,
                sandbox_id,
                attestation or {"isolation": "session"},
            )

        problem = plan.cwd_problem(request.cwd, self._mounts)
        if problem:
            return failed(problem)
        try:
            container = self._container()
        except AgentUnavailable as exc:
            return failed(exc.message)
        if isinstance(container, HookContainerSandbox):
            return container.run(request)
        meta = {
            "op": framing.OP_RUN,
            "command": request.command,
            "cwd": request.cwd,
            "env": dict(request.env),
            "timeout_s": float(timeout),
            "uid": self._uid,
            "gid": self._gid,
            "stdout_cap": limits.stdout_cap,
            "stderr_cap": limits.stderr_cap,
            "nofile": limits.nofile,
            "fsize": limits.fsize,
        }
        pending = container.submit(meta, request.stdin)
        if not pending.done.wait(timeout + self._grace):
            container.forget(pending)
            self._replace(
                container,
                f"the session agent did not answer within {timeout + self._grace:g}s "
                "(its timeout plus a grace period): it is wedged and is replaced for the next "
                "event",
            )
            pending.failure = pending.failure or (Outcome.SANDBOX_ERROR, container.dead or "")
        if pending.frame is None:
            outcome, reason = pending.failure or (Outcome.SANDBOX_ERROR, "no answer")
            if container.dead is not None:
                self._replace(container, container.dead)
            return failed(reason, container.short_id, outcome, container.attestation)
        return self._result(pending.frame, container, limits.stdout_cap, limits.stderr_cap)

    def _result(
        self, frame: framing.Frame, container: _AgentContainer, stdout_cap: int, stderr_cap: int
    ) -> ExecResult:
        meta = frame.meta
        out_len = int(meta.get("stdout_len", 0))
        err_len = int(meta.get("stderr_len", 0))
        outcome = _OUTCOMES.get(str(meta.get("outcome")), Outcome.SANDBOX_ERROR)
        message = str(meta.get("message") or "")
        if out_len > stdout_cap or err_len > stderr_cap or out_len + err_len != len(frame.body):
            self._replace(container, "the session agent broke the output caps; it is replaced")
            outcome, message = Outcome.SANDBOX_ERROR, "the session agent broke the output caps"
            out_len = err_len = 0
        if outcome is Outcome.SANDBOX_ERROR and meta.get("outcome") == "spawn_error":
            message = f"the session agent could not start the hook: {message}"
        code = meta.get("exit_code")
        return ExecResult(
            code if isinstance(code, int) else None,
            frame.body[:out_len],
            frame.body[out_len : out_len + err_len],
            float(meta.get("duration_s", 0.0)),
            outcome,
            message,
            container.short_id,
            container.attestation,
        )

    # -- the container ---------------------------------------------------------

    def _container(self) -> _AgentContainer | HookContainerSandbox:
        with self._lock:
            if self._closed:
                raise AgentUnavailable("the sandbox is closed")
            if self._fallback is not None:
                return self._fallback
            current = self._current
            if current is not None and current.dead is None:
                return current
            self._current = None
        if current is not None:
            current.shut()
        with self._lock:
            # Another thread may have started one meanwhile.
            if self._current is not None and self._current.dead is None:
                return self._current
            if self._fallback is not None:
                return self._fallback
            try:
                self._current = self._start()
            except AgentUnavailable as exc:
                if exc.no_python and self.spec.profile.fallback_to_hook:
                    return self._fall_back(exc.message)
                raise
            return self._current

    def _fall_back(self, reason: str) -> HookContainerSandbox:
        note("warning", "sandbox.session_fallback_to_hook", sandbox=self._id, reason=reason)
        self._fallback = HookContainerSandbox(
            self.spec,
            self._link,
            attestation_extra={"fallback_from": "session", "fallback_reason": reason},
            message_prefix=(
                "ran in hook isolation, not session (fallback_to_hook is set): " + reason
            ),
        )
        return self._fallback

    def _replace(self, container: _AgentContainer, reason: str) -> None:
        container.fail(reason)
        with self._lock:
            if self._current is container:
                self._current = None
        note(
            "warning",
            "sandbox.session_replaced",
            sandbox=self._id,
            container=container.short_id,
            reason=reason,
        )
        container.shut()

    def _plan(self) -> plan.ContainerPlan:
        self._generation += 1
        profile = self.spec.profile
        return plan.ContainerPlan(
            image=profile.image,
            runtime=profile.runtime,
            user="0:0",
            command=agent_argv(profile.runtime),
            entrypoint=["python3"],
            env={},
            working_dir="/",
            mounts=self._mounts + plan.agent_mounts(self.spec.agent_dir),
            limits=profile.limits,
            network=profile.network,
            labels=plan.sandbox_labels(self.spec, "session"),
            name=f"cloudrunner-{self._id}-g{self._generation}",
            cap_add=tuple(sorted(plan.AGENT_CAPS)),
            hook_user=f"{self._uid}:{self._gid}",
        )

    def _start(self) -> _AgentContainer:
        profile = self.spec.profile
        container_plan = self._plan()

        def explain(exc: BaseException) -> str:
            return engine.describe(
                exc, image=profile.image, runtime=profile.runtime, network=profile.network
            )

        try:
            client = self._link.client()
        except EngineUnavailable as exc:
            raise AgentUnavailable(exc.message) from exc
        cid = ""
        try:
            problem = engine.runtime_network_problem(client, profile.runtime, profile.network)
            if problem:
                raise AgentUnavailable(problem)

            def created(new: str) -> None:
                nonlocal cid
                cid = new

            _, attested, sock = hardening.create_attached(client, container_plan, created)
            attestation: dict[str, Any] = {"isolation": "session", **attested}
            max_body = profile.limits.stdout_cap + profile.limits.stderr_cap
            container = _AgentContainer(client, cid, sock, max_body, attestation)
            container.start_reading()
            try:
                client.api.start(cid)
            except docker.errors.APIError as exc:
                container.fail("the agent container did not start")
                container.shut()
                cid = ""
                if _no_python(str(exc)):
                    raise AgentUnavailable(
                        _no_python_message(profile.image), no_python=True
                    ) from exc
                raise AgentUnavailable(explain(exc)) from exc
        except hardening.HardeningNotInForce as exc:
            note("error", "sandbox.hardening_refused", sandbox=self._id, problem=exc.message)
            if cid:
                _remove_quietly(client, cid)
            raise AgentUnavailable(exc.message) from exc
        except AgentUnavailable:
            if cid:
                _remove_quietly(client, cid)
            raise
        except Exception as exc:
            if cid:
                _remove_quietly(client, cid)
            raise AgentUnavailable(explain(exc)) from exc

        if not container.hello_seen.wait(self._start_timeout) or container.hello is None:
            ended = container.gone.is_set() or container.dead is not None
            container.fail("the session agent did not start")
            container.gone.wait(5)
            tail = container.stderr_tail
            container.shut()
            if _no_python(tail) or container.exit_code == 127:
                raise AgentUnavailable(_no_python_message(profile.image), no_python=True)
            if ended:
                code = "unknown" if container.exit_code is None else container.exit_code
                raise AgentUnavailable(
                    f"the session agent exited (exit {code}) before it said hello"
                    + (f": {tail[-300:]}" if tail else "; it printed nothing")
                    + f"; check that {profile.image} runs python3"
                )
            raise AgentUnavailable(
                "the session agent did not say hello within "
                f"{self._start_timeout:g}s" + (f": {tail[-300:]}" if tail else "")
            )
        try:
            attestation.update(
                hardening.check_agent_status(container.hello.get("status") or {}, container_plan)
            )
        except hardening.HardeningNotInForce as exc:
            container.fail(exc.message)
            container.shut()
            raise AgentUnavailable(exc.message) from exc
        attestation["agent"] = {
            k: container.hello.get(k) for k in ("version", "pid", "uid", "python", "oom_counter")
        }
        note("debug", "sandbox.session_started", sandbox=self._id, container=container.short_id)
        return container


def _no_python(text: str) -> bool:
    lowered = text.lower()
    return "python3" in lowered and (
        "not found" in lowered or "no such file" in lowered or "executable file" in lowered
    )


def _no_python_message(image: str) -> str:
    return (
        f"image {image} has no python3, which session isolation needs for its agent; "
        'use an image with python3, set the source\'s isolation to "hook", or set '
        "fallback_to_hook = true to run its hooks in hook isolation"
    )


def _remove_quietly(client: docker.DockerClient, cid: str) -> None:
    with contextlib.suppress(Exception):
        client.api.remove_container(cid, force=True, v=True)
