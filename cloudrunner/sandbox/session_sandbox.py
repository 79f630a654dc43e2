"""`session` isolation: one warm container running the agent, many hook runs.

The framed protocol (`framing`) runs over a unix socket the agent connects to
(`agent_channel`: a root-only directory mounted read-only, one connection from the
container's init process with the token, then the listener is gone), so no engine process
sits on a hook's path. Where that cannot work (gVisor, a worker that is not root, an agent
that cannot connect) the container's attached stdin/stdout carry it, and the attestation's
`channel` says which and why. The attach stream stays open in either case for the agent's
stderr. One reader thread per container demultiplexes results to the waiting `run()` calls,
so any number of threads may run hooks at once. A container whose agent dies, or does not
answer within the request's timeout plus a grace period (wedged), is killed and removed; the
hooks in flight get sandbox_error (or oom, when the memory limit killed the container), and
the next run starts a new container.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors

from cloudrunner.docker_engine import EngineUnavailable
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox import agent_channel, container_plan, engine, framing, hardening
from cloudrunner.sandbox.agent_lifecycle import AgentLifecycle, Channel
from cloudrunner.sandbox.base import ExecRequest, ExecResult, SandboxSpec
from cloudrunner.sandbox.docker_stream import STDERR, STDOUT, StreamDemux
from cloudrunner.sandbox.hook_container import HookContainerSandbox
from cloudrunner.sandbox.prepared import PreparedSandbox
from cloudrunner.sandbox.sandbox_log import note

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
        f"import sys; sys.path.insert(0, {container_plan.AGENT_ROOT!r}); "
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
#: how long a connected peer has to send its hello before it is dropped
_HELLO_WAIT_S = 10.0
#: how long the end of a container waits for the rest of its stderr (socket channel)
_STDERR_DRAIN_S = 2.0


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
    """One generation of the session's container and its channel.

    The attach stream is read for the agent's stderr always, and for frames until the
    channel is known: the socket (`adopt`) or, when the agent answers on stdout, the
    attach stream itself. Where it is in its life is `life` (agent_lifecycle.py), the
    one record of it that every thread moves.
    """

    def __init__(
        self,
        client: docker.DockerClient,
        cid: str,
        sock: Any,
        max_body: int,
        attestation: dict[str, Any],
        listener: agent_channel.Listener | None,
    ) -> None:
        self.client = client
        self.cid = cid
        self.short_id = cid[:12]
        self._sock = sock
        self._attach: socket.socket = sock._sock
        #: where requests go: the attach stream until a socket is adopted
        self._raw: socket.socket = self._attach
        self.life = AgentLifecycle()
        self.listener = listener
        #: how the adopted connection's peer was checked (besides its token)
        self.peer = ""
        self._max_body = max_body
        self._decoder = framing.FrameDecoder(max_body=max_body)
        self._demux = StreamDemux()
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self.hello: dict[str, Any] | None = None
        #: the container's exit code, once the channel closed and the engine told it
        self.exit_code: int | None = None
        #: written to when the hello came, or the container ended: wakes `wait_for_agent`
        self._wake_r, self._wake_w = socket.socketpair()
        self.attestation = attestation
        self._stderr_tail = b""
        self._reader = threading.Thread(
            target=self._read_attach, name=f"cloudrunner-agent-{self.short_id}", daemon=True
        )

    def start_reading(self) -> None:
        self._reader.start()

    @property
    def dead(self) -> str | None:
        """Why the container failed, or None while it has not."""
        return self.life.reason

    @property
    def channel(self) -> str:
        return self.life.channel.value

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
            self.life.fail(reason)
            pending, self._pending = self._pending, {}
        for p in pending.values():
            p.failure = (outcome, reason)
            p.done.set()
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the channel -----------------------------------------------------------

    def wait_for_agent(self, timeout: float) -> str:
        """Until the agent said hello (on the socket or on stdout), the container ended or
        `timeout` passed. Connections that are not the agent's are dropped, and the
        returned text says why (for the error when no hello came)."""
        deadline = time.monotonic() + timeout
        refused = ""
        while not self.life.settled.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            # poll, not select: a daemon holding thousands of connections has descriptors
            # past select's 1024
            watched = select.poll()
            watched.register(self._wake_r, select.POLLIN)
            if self.listener is not None:
                watched.register(self.listener.fileno(), select.POLLIN)
            ready = {fd for fd, _ in watched.poll(max(1, math.ceil(left * 1000)))}
            if self._wake_r.fileno() in ready:
                with contextlib.suppress(OSError):
                    self._wake_r.recv(4096)
            if self.listener is not None and self.listener.fileno() in ready:
                problem = self._take_connection(deadline)
                if problem:
                    refused = problem
                    note(
                        "warning",
                        "sandbox.channel_peer_refused",
                        container=self.short_id,
                        problem=problem,
                    )
        return refused

    def _take_connection(self, deadline: float) -> str:
        """Accept one connection; adopt it when it is the agent's, else say why not."""
        assert self.listener is not None
        try:
            conn, pid, uid = self.listener.accept()
        except OSError as exc:
            return f"accepting a connection failed: {exc}"
        who = f"a connection from pid {pid} (uid {uid})"
        try:
            problem, decoder, frames = self._hello_of(conn, pid, deadline)
        except (OSError, framing.FramingError) as exc:
            problem, decoder, frames = f"{exc}", None, []
        if problem or decoder is None:
            conn.close()
            return f"{who} was refused: {problem}"
        if not self._adopt(conn, decoder, frames):
            conn.close()
            return f"{who} came when the agent had already answered on its stdout, or failed"
        self.peer = (
            f"token and pid {pid} (init of its own pid namespace)"
            if pid
            else "token (its pid is not visible to the worker)"
        )
        return ""

    def _hello_of(
        self, conn: socket.socket, pid: int, deadline: float
    ) -> tuple[str, framing.FrameDecoder | None, list[framing.Frame]]:
        """The first frames of a connection when it is the agent's (its peer is a pid
        namespace's init, as far as this process can see, and its first frame is a hello
        with the token), else why it is not."""
        assert self.listener is not None
        problem = agent_channel.peer_problem(pid)
        if problem:
            return problem, None, []
        decoder = framing.FrameDecoder(max_body=self._max_body)
        wait_until = min(deadline, time.monotonic() + _HELLO_WAIT_S)
        frames: list[framing.Frame] = []
        while not frames:
            left = wait_until - time.monotonic()
            if left <= 0:
                return "it sent no hello in time", None, []
            conn.settimeout(left)
            data = conn.recv(65536)
            if not data:
                return "it closed before its hello", None, []
            frames = decoder.feed(data)
        problem = agent_channel.check_hello(frames[0], self.listener.token)
        return problem, (None if problem else decoder), frames

    def _adopt(
        self, conn: socket.socket, decoder: framing.FrameDecoder, frames: list[framing.Frame]
    ) -> bool:
        """From now on requests and answers go over `conn`; nothing else can connect. False
        (nothing changed) when the container is past waiting for its agent."""
        assert self.listener is not None
        with self._lock:
            if not self.life.adopt_socket():
                return False
            self._raw = conn
            self._decoder = decoder
        self.listener.stop()
        conn.settimeout(None)
        threading.Thread(
            target=self._read_socket, name=f"cloudrunner-agent-{self.short_id}-ch", daemon=True
        ).start()
        for frame in frames:
            self._dispatch(frame)
        return True

    def _read_attach(self) -> None:
        try:
            self._pump(self._attach, self._attach_data)
        finally:
            if self.life.attach_closed() is Channel.ATTACH:
                self._ended()
            else:
                self._wake()

    def _attach_data(self, data: bytes) -> None:
        for stream, payload in self._demux.feed(data):
            if stream == STDOUT:
                if self.life.channel is Channel.ATTACH:
                    self._frames(payload)
            elif stream == STDERR:
                self._stderr_tail = (self._stderr_tail + payload)[-_STDERR_TAIL:]

    def _read_socket(self) -> None:
        try:
            self._pump(self._raw, self._frames)
        finally:
            self._ended()

    def _frames(self, data: bytes) -> None:
        for frame in self._decoder.feed(data):
            self._dispatch(frame)

    def _pump(self, source: socket.socket, handle: Callable[[bytes], None]) -> None:
        """Hand what `source` receives to `handle` until it closes; a broken frame fails
        this container."""
        try:
            while data := source.recv(65536):
                handle(data)
        except framing.FramingError as exc:
            self.fail(f"the session agent sent an unreadable frame ({exc}); it is replaced")
        except OSError:
            pass

    def _dispatch(self, frame: framing.Frame) -> None:
        op = frame.meta.get("op")
        if op == framing.OP_HELLO:
            if self.hello is None:
                self.hello = frame.meta
            self.life.hello()
            self._wake()
            return
        if op == framing.OP_RESULT:
            with self._lock:
                pending = self._pending.pop(frame.meta.get("id"), None)  # type: ignore[arg-type]
            if pending is not None:
                pending.frame = frame
                pending.done.set()

    def _ended(self) -> None:
        """The channel closed: the agent or its container is gone."""
        if not self.life.channel_closed():
            return
        outcome, reason = Outcome.SANDBOX_ERROR, self.dead
        if reason is None:
            state: dict[str, Any] = {}
            with contextlib.suppress(Exception):
                self.client.api.wait(self.cid, timeout=10)
                state = self.client.api.inspect_container(self.cid).get("State") or {}
            # On the socket channel the agent's last words still come down the attach stream.
            self.life.attach_done.wait(_STDERR_DRAIN_S)
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
        self.life.ended()
        self._wake()

    def shut(self) -> None:
        """Close the channel (the agent then kills its hooks and exits) and remove."""
        for raw in {self._raw, self._attach}:
            with contextlib.suppress(OSError):
                raw.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                raw.close()
        with contextlib.suppress(OSError):
            self._sock.close()
        try:
            self.client.api.remove_container(self.cid, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except Exception as exc:  # the reaper removes it later
            note("warning", "sandbox.remove_failed", container=self.short_id, error=str(exc)[:200])
        if self.listener is not None:
            self.listener.remove()
        for end in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                end.close()


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

        problem = container_plan.cwd_problem(request.cwd, self._mounts)
        if problem:
            return failed(problem)
        try:
            container = self._container()
        except AgentUnavailable as exc:
            return failed(exc.message)
        if container is None:  # the sandbox has fallen back to hook isolation
            fallback = self._fallback
            assert fallback is not None
            return fallback.run(request)
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
        if self.spec.on_start is not None:
            self.spec.on_start(container.cid, request.env)
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

    def _container(self) -> _AgentContainer | None:
        """The live agent container (started when there is none), or None once the sandbox
        has fallen back to hook isolation (`_fallback` set: its state, kept for good)."""
        with self._lock:
            if self._closed:
                raise AgentUnavailable("the sandbox is closed")
            if self._fallback is not None:
                return None
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
                return None
            try:
                self._current = self._start()
            except AgentUnavailable as exc:
                if exc.no_python and self.spec.profile.fallback_to_hook:
                    self._fall_back(exc.message)
                    return None
                raise
            return self._current

    def _fall_back(self, reason: str) -> None:
        note("warning", "sandbox.session_fallback_to_hook", sandbox=self._id, reason=reason)
        self._fallback = HookContainerSandbox(
            self.spec,
            self._link,
            attestation_extra={"fallback_from": "session", "fallback_reason": reason},
            message_prefix=(
                "ran in hook isolation, not session (fallback_to_hook is set): " + reason
            ),
        )

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

    def _plan(self, listener: agent_channel.Listener | None = None) -> container_plan.ContainerPlan:
        self._generation += 1
        profile = self.spec.profile
        channel_mounts = (listener.mount(),) if listener is not None else ()
        return container_plan.ContainerPlan(
            image=profile.image,
            runtime=profile.runtime,
            user="0:0",
            command=agent_argv(profile.runtime),
            entrypoint=["python3"],
            env=listener.env() if listener is not None else {},
            working_dir="/",
            mounts=self._mounts + container_plan.agent_mounts(self.spec.agent_dir) + channel_mounts,
            limits=profile.limits,
            network=profile.network,
            labels=container_plan.sandbox_labels(self.spec, "session"),
            name=f"cloudrunner-{self._id}-g{self._generation}",
            cap_add=tuple(sorted(container_plan.AGENT_CAPS)),
            hook_user=f"{self._uid}:{self._gid}",
        )

    def _listen(self) -> tuple[agent_channel.Listener | None, str]:
        """The next container's socket channel, or None and why the attach stream is kept."""
        runtime = self.spec.profile.runtime
        if runtime in agent_channel.REFUSING_RUNTIMES:
            return None, agent_channel.REFUSING_RUNTIMES[runtime]
        try:
            root = agent_channel.channel_root(self.spec.agent_dir)
            return agent_channel.Listener.open(root, self._id), ""
        except agent_channel.ChannelUnavailable as exc:
            return None, exc.reason

    def _start(self) -> _AgentContainer:
        profile = self.spec.profile
        listener, channel_reason = self._listen()
        plan = self._plan(listener)

        def explain(exc: BaseException) -> str:
            return engine.describe(
                exc, image=profile.image, runtime=profile.runtime, network=profile.network
            )

        def discard(client: docker.DockerClient | None, cid: str) -> None:
            if client is not None and cid:
                _remove_quietly(client, cid)
            if listener is not None:
                listener.remove()

        try:
            client = self._link.client()
        except EngineUnavailable as exc:
            discard(None, "")
            raise AgentUnavailable(exc.message) from exc
        cid = ""
        try:
            problem = engine.runtime_network_problem(client, profile.runtime, profile.network)
            if problem:
                raise AgentUnavailable(problem)

            def created(new: str) -> None:
                nonlocal cid
                cid = new

            _, attested, sock = hardening.create_attached(client, plan, created)
            attestation: dict[str, Any] = {"isolation": "session", **attested}
            max_body = profile.limits.stdout_cap + profile.limits.stderr_cap
            container = _AgentContainer(client, cid, sock, max_body, attestation, listener)
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
            discard(client, cid)
            raise AgentUnavailable(exc.message) from exc
        except AgentUnavailable:
            discard(client, cid)
            raise
        except Exception as exc:
            discard(client, cid)
            raise AgentUnavailable(explain(exc)) from exc

        refused = container.wait_for_agent(self._start_timeout)
        if container.hello is None:
            ended = container.life.gone.is_set() or container.dead is not None
            container.fail("the session agent did not start")
            container.life.gone.wait(5)
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
                f"{self._start_timeout:g}s"
                + (f": {tail[-300:]}" if tail else "")
                + (f" ({refused})" if refused else "")
            )
        try:
            attestation.update(
                hardening.check_agent_status(container.hello.get("status") or {}, plan)
            )
        except hardening.HardeningNotInForce as exc:
            container.fail(exc.message)
            container.shut()
            raise AgentUnavailable(exc.message) from exc
        attestation["agent"] = {
            k: container.hello.get(k) for k in ("version", "pid", "uid", "python", "oom_counter")
        }
        attestation.update(self._channel_attestation(container, channel_reason))
        note("debug", "sandbox.session_started", sandbox=self._id, container=container.short_id)
        return container

    def _channel_attestation(self, container: _AgentContainer, reason: str) -> dict[str, Any]:
        """Which channel the container's requests take, and why not the socket."""
        if container.channel == "socket":
            return {"channel": "socket", "channel_peer": container.peer}
        if container.listener is not None:
            container.listener.remove()  # the agent did not connect: nothing else may
        hello = container.hello or {}
        reason = (
            reason
            or str(hello.get("channel_error") or "")
            or "the session agent answered on its stdout, not on the socket"
        )
        level = (
            "info" if self.spec.profile.runtime in agent_channel.REFUSING_RUNTIMES else "warning"
        )
        note(
            level,
            "sandbox.channel_attach",
            sandbox=self._id,
            container=container.short_id,
            reason=reason,
        )
        return {"channel": "attach", "channel_reason": reason}


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
