"""The session agent: runs inside a warm container, standard library only.

Started as the container's PID 1 (so orphaned hook processes are re-parented to it and can
be found and killed). Its framed channel to the host (see `framing`) is the unix socket its
environment names (`framing.CHANNEL_SOCKET_ENV`, in a root-only directory the host made
and mounted read-only; see the host's `agent_channel`): it connects, and its hello carries
the token of `framing.CHANNEL_TOKEN_ENV`. Both variables are taken out of its environment
first, so no hook inherits them. Without them, or when the connect fails (its hello then
says why), the channel is the container's stdin/stdout, attached through the engine.
Either way, the channel closing means the host is gone: the agent kills its hooks and
exits. For every "run" request it starts `/bin/sh -c COMMAND`:

- in its own session and process group (so the whole hook can be killed at once),
- with the request's stdin/stdout/stderr pipes and per-process rlimits,
- as the hook's unprivileged uid/gid with no supplementary groups,
- in the request's directory.

How it starts the hook matters for speed: `fork()` of a Python process costs 1-5 ms here
(the page tables are copied, and every page the child touches before `exec` faults), most
of a warm hook's overhead. So the agent uses `posix_spawn` (glibc: `clone(CLONE_VFORK)`,
no copy) wherever it can get the same result without running Python in the child:

- uid/gid: the agent itself switches to the hook's real and effective uid/gid, keeping
  0 as its *saved* uid/gid, spawns, and switches back (allowed by the saved id 0; its
  effective capabilities return with euid 0). The `exec` sets the hook's saved ids to its
  effective ones and, as the uids are non-zero, clears every capability. The working
  directory is entered in the same window, so it is checked with the hook's permissions.
  While the window is open a hook of that uid could signal the agent, but the kernel
  delivers to a namespace's PID 1 only signals it has a handler for: SIGCHLD (a wake-up)
  and nothing else, since SIGINT is ignored here. Ptrace needs the saved uid to match too.
  gVisor does not shield PID 1 that way (a hook's `kill -9 -1` in the window ended the
  agent), so under runsc the worker starts the agent with `main(spawn=False)`: fork only.
- RLIMIT_NOFILE, RLIMIT_FSIZE and RLIMIT_CORE are the same for every request of a
  sandbox: the agent lowers its own hard limits to them on the first request (it needs
  neither more files than that nor to write regular files), and the hook inherits them.
- oom_score_adj (1000, so the memory limit kills the hook, not the agent) and the soft
  RLIMIT_CPU (per request: its timeout + 2 s) are the agent's own for the moment of the
  spawn, and put back right after it (raising the score, and moving a soft limit under
  the hard one, need no privilege; lowering the score back to where it was does not
  either). The hook's *hard* CPU limit stays the agent's (unlimited), so a hook could
  raise its soft limit; the CPU limit is a second line only: the agent kills the hook's
  group at its timeout, and the container's CPU quota bounds what it can burn. (Setting
  it with prlimit() after the spawn would race: the vfork parent resumes before the
  exec has committed the hook's credentials, so the call is refused.)

A request whose nofile/fsize differ from what the agent holds (or asks for fewer files
than the agent needs itself) is started the old way: `fork`, set everything up in the
child, `exec`.

The agent runs as uid 0 with only CAP_SETUID, CAP_SETGID (to drop to the hook's uid) and
CAP_KILL (to kill the hook's processes, which belong to another uid) in its bounding set;
the hook gets none of them (exec as a non-root uid clears them, and no-new-privileges
stops setuid binaries from giving any back), and it cannot signal or trace the agent.

It is one single-threaded poll loop, so many requests run at once without fork-in-thread
hazards. It enforces each request's timeout and output caps by killing the process group,
kills every process left behind when a request ends, and answers with one result frame.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import resource
import select
import signal
import socket
import sys
import time
from typing import Any

from cloudrunner.sandbox import framing

_READ_CHUNK = 65536
#: the agent keeps this many file descriptors for itself (4 pipes per running hook)
_AGENT_MIN_NOFILE = 256
#: how long to wait for a finished hook's pipes to close once its processes are killed
_DRAIN_GRACE_S = 2.0
_OOM_COUNTERS = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "id": int,
    "command": str,
    "cwd": str,
    "env": dict,
    "timeout_s": (int, float),
    "uid": int,
    "gid": int,
    "stdout_cap": int,
    "stderr_cap": int,
    "nofile": int,
    "fsize": int,
}


def _log(message: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, (f"cloudrunner-agent: {message}\n").encode("utf-8", "replace"))


def read_oom_kills() -> int | None:
    """The container cgroup's count of OOM kills (cgroup v1 or v2), None where there is none."""
    for path in _OOM_COUNTERS:
        try:
            with open(path, encoding="ascii") as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


_HOMES: dict[int, str] = {}


def home_of(uid: int) -> str:
    """The uid's home from the image's passwd ("/" without an entry); looked up once."""
    home = _HOMES.get(uid)
    if home is None:
        try:
            home = pwd.getpwuid(uid).pw_dir
        except KeyError:
            home = "/"
        _HOMES[uid] = home
    return home


class Job:
    """One running hook."""

    def __init__(self, meta: dict[str, Any], stdin: bytes) -> None:
        self.id: int = meta["id"]
        self.meta = meta
        self.stdin = memoryview(stdin)
        self.stdin_pos = 0
        self.pid = 0
        self.fds: dict[int, str] = {}
        self.out = bytearray()
        self.err = bytearray()
        self.started = time.monotonic()
        self.deadline = self.started + float(meta["timeout_s"])
        self.ended: float | None = None
        self.status: int | None = None
        self.killed: str | None = None
        self.oom_before = read_oom_kills()
        self.drain_deadline: float | None = None


class Agent:
    def __init__(
        self,
        in_fd: int = 0,
        out_fd: int = 1,
        *,
        spawn: bool = True,
        hello: dict[str, Any] | None = None,
    ) -> None:
        self.in_fd = in_fd
        #: what the hello says about the channel (see `main`)
        self.hello_extra = dict(hello or {})
        self.out_fd = out_fd
        self.decoder = framing.FrameDecoder()
        self.poller = select.poll()
        self.jobs: dict[int, Job] = {}
        self.by_pid: dict[int, Job] = {}
        self.by_fd: dict[int, Job] = {}
        self.just_ended: list[Job] = []
        self.sweep_due = False
        self.hook_uids: set[int] = set()
        self.stdin_open = True
        self.base_env = {k: v for k, v in os.environ.items() if k != "HOME"}
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        #: (nofile, fsize) the agent's own hard limits were lowered to, for spawned hooks
        self.held_limits: tuple[int, int] | None = None
        self.can_spawn = spawn and hasattr(os, "posix_spawn") and os.getuid() == 0
        #: the agent's own, put back after each spawn
        self.cpu_limits = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
        self.oom_score_adj = b"0"

    # -- channel ---------------------------------------------------------------

    def send(self, meta: dict[str, Any], body: bytes = b"") -> None:
        data = memoryview(framing.encode(meta, body))
        while data:
            written = os.write(self.out_fd, data)
            data = data[written:]

    def serve(self) -> int:
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        # No handler for SIGINT: as PID 1 nobody in the container can then send it (see above).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # The agent lends its soft CPU limit to each spawned hook for a moment; past it the
        # kernel sends SIGXCPU, which must not end the agent (hooks get the default back).
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        if self.can_spawn:
            try:
                os.setgroups([])  # spawned hooks inherit the agent's (empty) groups
                self.cpu_limits = resource.getrlimit(resource.RLIMIT_CPU)
                with open("/proc/self/oom_score_adj", "rb") as fh:
                    self.oom_score_adj = fh.read().strip()
            except OSError as exc:
                _log(f"cannot spawn hooks, forking each: {exc}")
                self.can_spawn = False
        signal.set_wakeup_fd(self.wake_w)
        self.poller.register(self.in_fd, select.POLLIN)
        self.poller.register(self.wake_r, select.POLLIN)
        self.send(
            {
                "op": framing.OP_HELLO,
                "version": framing.PROTOCOL_VERSION,
                "pid": os.getpid(),
                "uid": os.getuid(),
                "python": sys.version.split()[0],
                "oom_counter": read_oom_kills() is not None,
                "status": _own_status(),
                **self.hello_extra,
            }
        )
        while self.stdin_open or self.jobs:
            for fd, events in self.poller.poll(self._poll_timeout_ms()):
                if fd == self.in_fd:
                    self._read_channel()
                elif fd == self.wake_r:
                    self._drain_wakeups()
                else:
                    self._job_io(fd, events)
            self._enforce_deadlines()
            self._reap()
            self._finish_ready()
            if self.sweep_due:
                self.sweep_due = False
                self._sweep()
                self._reap()
        return 0

    def _poll_timeout_ms(self) -> int | None:
        deadlines = []
        for job in self.jobs.values():
            deadlines.append(job.drain_deadline if job.status is not None else job.deadline)
        if not deadlines:
            return None
        left = min(d for d in deadlines if d is not None) - time.monotonic()
        return max(0, int(left * 1000) + 1)

    def _read_channel(self) -> None:
        try:
            data = os.read(self.in_fd, _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""  # a reset socket: closed as well
        if not data:
            # The host closed the channel (it is gone or closing us): nothing may outlive it.
            self.stdin_open = False
            self.poller.unregister(self.in_fd)
            for job in self.jobs.values():
                self._kill(job, job.killed or "agent_closing")
            return
        try:
            frames = self.decoder.feed(data)
        except framing.FramingError as exc:
            _log(f"unreadable request stream, exiting: {exc}")
            raise SystemExit(3) from exc
        for frame in frames:
            self._start(frame)

    def _drain_wakeups(self) -> None:
        # The pipe is non-blocking: read until it is empty (BlockingIOError) or closed.
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake_r, 4096):
                continue

    # -- starting a hook -------------------------------------------------------

    def _start(self, frame: framing.Frame) -> None:
        meta = frame.meta
        problem = _invalid(meta)
        if problem:
            self.send(_result(meta.get("id"), "spawn_error", None, problem, 0.0))
            return
        held = self.held_limits
        if held is not None and (meta["nofile"] > held[0] or meta["fsize"] > held[1]):
            message = (
                f"this agent holds nofile {held[0]} and fsize {held[1]} for its hooks "
                "(the sandbox's limits); a request cannot raise them"
            )
            self.send(_result(meta["id"], "spawn_error", None, message, 0.0))
            return
        job = Job(meta, frame.body)
        self.hook_uids.add(meta["uid"])
        try:
            (in_r, in_w), (out_r, out_w), (err_r, err_w) = _hook_pipes(meta["uid"], meta["gid"])
        except OSError as exc:
            self.send(_result(job.id, "spawn_error", None, f"pipes: {exc}", 0.0))
            return
        env = dict(self.base_env)
        env["HOME"] = home_of(meta["uid"])
        env.update({str(k): str(v) for k, v in meta["env"].items()})
        if self._holds_limits(meta):
            pid, failure = self._spawn(meta, env, in_r, out_w, err_w)
        else:
            pid, failure = _fork(meta, env, in_r, out_w, err_w)
        for fd in (in_r, out_w, err_w):
            os.close(fd)
        if failure:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            self.send(_result(job.id, "spawn_error", None, failure, 0.0))
            return
        job.pid = pid
        self.jobs[job.id] = job
        self.by_pid[pid] = job
        for fd, kind in ((out_r, "out"), (err_r, "err")):
            os.set_blocking(fd, False)
            job.fds[fd] = kind
            self.by_fd[fd] = job
            self.poller.register(fd, select.POLLIN)
        if job.stdin:
            os.set_blocking(in_w, False)
            job.fds[in_w] = "in"
            self.by_fd[in_w] = job
            self.poller.register(in_w, select.POLLOUT)
        else:
            os.close(in_w)

    def _holds_limits(self, meta: dict[str, Any]) -> bool:
        """Whether the agent's own nofile/fsize/core hard limits are the request's (lowering
        them on the first request), so a spawned hook inherits them."""
        if not self.can_spawn:
            return False
        wanted = (meta["nofile"], meta["fsize"])
        if self.held_limits is None:
            if meta["nofile"] < _AGENT_MIN_NOFILE:
                return False
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (wanted[0], wanted[0]))
                resource.setrlimit(resource.RLIMIT_FSIZE, (wanted[1], wanted[1]))
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            except (OSError, ValueError) as exc:
                _log(f"cannot hold the hooks' rlimits, forking each hook: {exc}")
                self.can_spawn = False
                return False
            self.held_limits = wanted
        return self.held_limits == wanted

    def _spawn(
        self, meta: dict[str, Any], env: dict[str, str], in_r: int, out_w: int, err_w: int
    ) -> tuple[int, str]:
        """posix_spawn the hook under its uid/gid (see the module docstring); (pid, "") or
        (0, why it could not start)."""
        uid, gid = meta["uid"], meta["gid"]
        cpu = int(meta["timeout_s"]) + 2
        step = "oom_score_adj"
        try:
            # Inherited by the new process from its first instruction; the agent's own are
            # restored right after the spawn.
            _write_oom_score_adj(b"1000")
            step = "rlimits"
            hard = self.cpu_limits[1]
            soft = cpu if hard == resource.RLIM_INFINITY else min(cpu, hard)
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
            step = f"drop to uid {uid} gid {gid}"
            os.setresgid(gid, gid, 0)
            os.setresuid(uid, uid, 0)
            step = "working directory {}".format(meta["cwd"])
            os.chdir(meta["cwd"])
            step = "exec /bin/sh"
            pid = os.posix_spawn(
                "/bin/sh",
                ["/bin/sh", "-c", meta["command"]],
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, in_r, 0),
                    (os.POSIX_SPAWN_DUP2, out_w, 1),
                    (os.POSIX_SPAWN_DUP2, err_w, 2),
                ],
                setsid=True,
                # An ignored signal stays ignored across exec: Python ignores SIGPIPE (`yes |
                # head` style hooks rely on the default), the agent SIGXCPU (see serve).
                setsigdef=(signal.SIGPIPE, signal.SIGXCPU),
            )
            return pid, ""
        except OSError as exc:
            return 0, f"{step}: {exc}"
        finally:
            self._restore()

    def _restore(self) -> None:
        """The agent's own uid, gid, directory, CPU limit and OOM score, as before a spawn;
        an agent that cannot get them back is no longer safe to run."""
        try:
            os.setresuid(0, 0, 0)
            os.setresgid(0, 0, 0)
            os.chdir("/")
            resource.setrlimit(resource.RLIMIT_CPU, self.cpu_limits)
            _write_oom_score_adj(self.oom_score_adj)
        except (OSError, ValueError) as exc:
            _log(f"cannot restore the agent's own state after starting a hook, exiting: {exc}")
            os._exit(3)

    # -- running hooks ---------------------------------------------------------

    def _job_io(self, fd: int, events: int) -> None:
        job = self.by_fd.get(fd)
        if job is None:
            return
        kind = job.fds[fd]
        if kind == "in":
            try:
                if events & (select.POLLERR | select.POLLHUP):
                    raise BrokenPipeError
                chunk = job.stdin[job.stdin_pos : job.stdin_pos + _READ_CHUNK]
                job.stdin_pos += os.write(fd, chunk)
                if job.stdin_pos < len(job.stdin):
                    return
            except BlockingIOError:
                return
            except OSError:
                pass  # the hook closed its stdin: it does not want the rest
            self._close_fd(job, fd)
            return
        try:
            data = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close_fd(job, fd)
            return
        buf, cap = (
            (job.out, job.meta["stdout_cap"])
            if kind == "out"
            else (job.err, job.meta["stderr_cap"])
        )
        room = cap - len(buf)
        if room > 0:
            buf += data[:room]
        if len(data) > room and job.killed is None:
            self._kill(job, "output_overflow")

    def _close_fd(self, job: Job, fd: int) -> None:
        self.poller.unregister(fd)
        del job.fds[fd]
        del self.by_fd[fd]
        os.close(fd)

    def _kill(self, job: Job, reason: str) -> None:
        if job.killed is None:
            job.killed = reason
        self._kill_group(job.pid)

    def _collect(self) -> None:
        """Reap every exited child; queue the jobs whose main process ended for `_reap`."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            job = self.by_pid.pop(pid, None)
            if job is None:
                continue  # an orphaned hook process re-parented to us
            job.status = status
            job.ended = time.monotonic()
            job.drain_deadline = job.ended + _DRAIN_GRACE_S
            self.just_ended.append(job)

    def _reap(self) -> None:
        self._collect()
        while self.just_ended:
            # Hooks may not outlive their request: the rest of its group goes now, and
            # anything that escaped the group (setsid, double fork) goes in the sweep,
            # which runs right after the answers go out and before the next request.
            self._kill_group(self.just_ended.pop().pid)
            self.sweep_due = True

    def _kill_group(self, pgid: int) -> None:
        # A fork bomb forks while we kill, and killed members linger as zombies until
        # reaped: repeat kill-and-reap until the group is gone.
        for _ in range(200):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                return
            self._collect()
            time.sleep(0.001)

    def _enforce_deadlines(self) -> None:
        now = time.monotonic()
        for job in self.jobs.values():
            if job.status is None and now >= job.deadline and job.killed is None:
                self._kill(job, "timeout")
            elif job.status is not None and job.drain_deadline and now >= job.drain_deadline:
                for fd in list(job.fds):
                    self._close_fd(job, fd)

    def _finish_ready(self) -> None:
        for job in [j for j in self.jobs.values() if j.status is not None and not j.fds]:
            del self.jobs[job.id]
            self._answer(job)

    def _answer(self, job: Job) -> None:
        status = job.status if job.status is not None else 0
        duration = (job.ended or time.monotonic()) - job.started
        if os.WIFSIGNALED(status):
            signum = os.WTERMSIG(status)
            code: int | None = 128 + signum
        else:
            signum = 0
            code = os.waitstatus_to_exitcode(status)
        message = ""
        if job.killed == "timeout":
            outcome, code = "timeout", None
            message = "killed after its timeout of {:g}s".format(job.meta["timeout_s"])
        elif job.killed == "output_overflow":
            outcome, code = "output_overflow", None
            message = (
                f"stdout over {job.meta['stdout_cap']} bytes or "
                f"stderr over {job.meta['stderr_cap']} bytes; killed"
            )
        elif job.killed is not None:
            outcome, code = "spawn_error", None
            message = "the agent was closing; the hook was killed"
        elif code == 128 + signal.SIGKILL and _oom_rose(job.oom_before):
            # SIGKILLed (or its shell reports a SIGKILLed child) while the cgroup's OOM
            # count rose: the memory limit killed it.
            outcome = "oom"
            message = "killed by the memory limit"
        elif code == 0:
            outcome = "ok"
        else:
            outcome = "error"
            if signum:
                message = f"killed by signal {signum}"
        meta = _result(job.id, outcome, code, message, duration)
        meta["stdout_len"] = len(job.out)
        meta["stderr_len"] = len(job.err)
        self.send(meta, bytes(job.out) + bytes(job.err))

    def _sweep(self) -> None:
        """Kill every hook process that belongs to no running request (left behind).

        Only as PID 1 of the container's own pid namespace, and only processes owned by a
        uid this agent ran hooks as: outside a container this must never touch anything.
        """
        if os.getpid() != 1 or not self.hook_uids:
            return
        live = {job.pid for job in self.jobs.values() if job.status is None and job.pid}
        for _ in range(20):
            table = _process_table()
            victims = []
            for pid, (_ppid, pgrp, sid, state) in table.items():
                if pid == 1 or state == "Z" or pgrp in live or sid in live:
                    continue
                if _owner(pid) in self.hook_uids and not _descends_from(pid, live, table):
                    victims.append(pid)
            if not victims:
                return
            for pid in victims:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            self._collect()


def _own_status() -> dict[str, str]:
    """The agent's capability sets and no_new_privs as the kernel reports them."""
    wanted = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
    found: dict[str, str] = {}
    # Without /proc the sets are simply not reported; the host then refuses the container.
    with (
        contextlib.suppress(OSError),
        open("/proc/self/status", encoding="ascii", errors="replace") as fh,
    ):
        for line in fh:
            key, _, value = line.partition(":")
            if key in wanted:
                found[key] = value.strip()
    return found


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _invalid(meta: dict[str, Any]) -> str:
    if meta.get("op") != framing.OP_RUN:
        return "unknown op {!r}".format(meta.get("op"))
    for key, kind in _REQUIRED.items():
        if not isinstance(meta.get(key), kind) or isinstance(meta.get(key), bool):
            return f"request field {key!r} is missing or not a {kind}"
    if meta["uid"] <= 0 or meta["gid"] <= 0:
        return "hooks never run as uid/gid 0"
    if meta["timeout_s"] <= 0:
        return "timeout_s must be positive"
    return ""


def _result(
    job_id: object, outcome: str, code: int | None, message: str, duration: float
) -> dict[str, Any]:
    return {
        "op": framing.OP_RESULT,
        "id": job_id,
        "outcome": outcome,
        "exit_code": code,
        "message": message,
        "duration_s": duration,
        "stdout_len": 0,
        "stderr_len": 0,
    }


def _oom_rose(before: int | None) -> bool:
    after = read_oom_kills()
    return before is not None and after is not None and after > before


def _process_table() -> dict[int, tuple[int, int, int, str]]:
    table: dict[int, tuple[int, int, int, str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                raw = fh.read().decode("ascii", "replace")
        except OSError:
            continue
        # The command name may hold spaces and parentheses: split after its last ')'.
        fields = raw[raw.rfind(")") + 2 :].split()
        try:
            table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]), fields[0])
        except (IndexError, ValueError):
            continue
    return table


def _descends_from(pid: int, roots: set[int], table: dict[int, tuple[int, int, int, str]]) -> bool:
    seen = set()
    while pid in table and pid not in seen:
        if pid in roots:
            return True
        seen.add(pid)
        pid = table[pid][0]
    return False


def _write_oom_score_adj(value: bytes) -> None:
    fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
    try:
        os.write(fd, value)
    finally:
        os.close(fd)


def _hook_pipes(uid: int, gid: int) -> list[tuple[int, int]]:
    """The hook's stdin, stdout and stderr pipes (read end, write end), owned by its uid.

    A pipe belongs to whoever made it, with mode 0600, and opening it again by path
    (`/dev/stdin` is `/proc/self/fd/0`; `jq . /dev/stdin`, `echo x >/dev/stderr`,
    Node's `readFileSync("/dev/stdin")`) checks that mode: made by the agent (uid 0) the
    hook could not open its own streams by path, as it can on a VM. So the agent makes them
    with the hook's effective uid/gid (keeping 0 as its real and saved ids, as in a spawn)
    and switches back; `fchown` would do the same under runc, but gVisor refuses it on a
    pipe. The hook gains nothing it did not have: these pipes are its own streams; the
    agent's channel and the other ends live in the agent's descriptor table, which a hook
    of another uid cannot reach through /proc."""
    switch = os.geteuid() == 0 and uid != 0
    if switch:
        os.setresgid(0, gid, 0)
        try:
            os.setresuid(0, uid, 0)
        except OSError:
            os.setresgid(0, 0, 0)
            raise
    pipes: list[tuple[int, int]] = []
    try:
        for _ in range(3):
            pipes.append(os.pipe2(os.O_CLOEXEC))
        return pipes
    except OSError:
        for fd in (fd for pair in pipes for fd in pair):
            os.close(fd)
        raise
    finally:
        if switch:
            try:
                os.setresuid(0, 0, 0)
                os.setresgid(0, 0, 0)
            except OSError as exc:
                _log(f"cannot restore the agent's own ids after making a hook's pipes: {exc}")
                os._exit(3)


def _fork(
    meta: dict[str, Any], env: dict[str, str], in_r: int, out_w: int, err_w: int
) -> tuple[int, str]:
    """Fork a child that sets everything up itself and execs the hook: (pid, "") or (0, why
    it could not start). Slower than a spawn; used where a spawn cannot do the same."""
    st_r, st_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        _child(meta, env, in_r, out_w, err_w, st_w)
    os.close(st_w)
    # The status pipe closes on a successful exec (close-on-exec) or carries the failure.
    failure = b""
    while True:
        chunk = os.read(st_r, 4096)
        if not chunk:
            break
        failure += chunk
    os.close(st_r)
    if failure:
        os.waitpid(pid, 0)
        return 0, failure.decode("utf-8", "replace")
    return pid, ""


def _child(
    meta: dict[str, Any], env: dict[str, str], in_r: int, out_w: int, err_w: int, st_w: int
) -> None:
    """In the forked child: never returns (execs the hook or exits 127)."""
    step = "start"
    try:
        step = "reset signals"
        # Caught signals go back to default at exec by themselves; an ignored one stays
        # ignored: Python ignores SIGPIPE, which `yes | head` style hooks rely on, and the
        # agent SIGXCPU.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)
        step = "setsid"
        os.setsid()
        step = "redirect stdio"
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        step = "oom_score_adj"
        try:
            # Make the hook, not the agent, the memory limit's first victim.
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            os.write(fd, b"1000")
            os.close(fd)
        except OSError:
            pass
        step = "rlimits"
        cpu = int(meta["timeout_s"]) + 2
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (meta["nofile"], meta["nofile"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (meta["fsize"], meta["fsize"]))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        step = f"drop to uid {meta['uid']} gid {meta['gid']}"
        os.setgroups([])
        os.setresgid(meta["gid"], meta["gid"], meta["gid"])
        os.setresuid(meta["uid"], meta["uid"], meta["uid"])
        step = "working directory {}".format(meta["cwd"])
        os.chdir(meta["cwd"])
        step = "exec /bin/sh"
        os.execve("/bin/sh", ["/bin/sh", "-c", meta["command"]], env)
    except BaseException as exc:
        try:
            os.write(st_w, (f"{step}: {exc}").encode("utf-8", "replace"))
        finally:
            os._exit(127)


def main(spawn: bool = True) -> int:
    """`spawn=False`: fork every hook. For runtimes where PID 1 is not shielded from its
    namespace's signals (gVisor): the spawn window, in which the agent has the hook's uid,
    would let a hook's `kill -9 -1` end the agent."""
    if os.getpid() != 1:
        _log("warning: not PID 1; processes that escape a hook's group may be missed")
    channel, hello = connect_channel(os.environ)
    fd_in, fd_out = (0, 1) if channel is None else (channel.fileno(), channel.fileno())
    try:
        return Agent(fd_in, fd_out, spawn=spawn, hello=hello).serve()
    except ConnectionError:
        return 0  # the host went away
    finally:
        if channel is not None:
            channel.close()


def connect_channel(environ: Any) -> tuple[socket.socket | None, dict[str, Any]]:
    """The unix socket the environment names, connected (None: use stdin/stdout), and what
    the hello says about it. Takes both variables out of `environ` (hooks never see them)."""
    path = environ.pop(framing.CHANNEL_SOCKET_ENV, "")
    token = environ.pop(framing.CHANNEL_TOKEN_ENV, "")
    if not path:
        return None, {"channel": "attach"}
    # Not inherited by hooks: Python makes its sockets close-on-exec.
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        channel.connect(path)
    except OSError as exc:
        channel.close()
        reason = f"cannot connect to {path}: {exc.strerror or exc}"
        _log(f"{reason}; answering on stdout")
        return None, {"channel": "attach", "channel_error": reason}
    return channel, {"channel": "socket", "token": token}


if __name__ == "__main__":
    raise SystemExit(main())
