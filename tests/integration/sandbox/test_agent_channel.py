"""The session agent's direct channel (a unix socket, not the engine's attach stream), with
real containers: which channel is used and attested, who can reach it (hostile hooks, a
peer that is not the agent, an agent that connects twice or never), and its directory
going with its container."""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import shutil
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox import (
    ExecRequest,
    ExecResult,
    SessionSandbox,
    agent_channel,
    agent_files,
    container_plan,
    framing,
    reaper,
)
from tests.integration.sandbox.conftest import SandboxFactory
from tests.integration.sandbox.test_hostile_hooks import next_hook_runs
from tests.support.docker_tracking import DockerTracker
from tests.support.waiting import came_true, wait_for

pytestmark = pytest.mark.docker

PlanChange = Callable[[container_plan.ContainerPlan], container_plan.ContainerPlan]
#: how a fake agent gets at the agent's files (mounted as in every session container)
IMPORT_AGENT = (
    f"import os, socket, sys, time; sys.path.insert(0, {container_plan.AGENT_ROOT!r}); "
    "from cloudrunner.sandbox import agent, framing; "
)


class _Changed(SessionSandbox):
    """A session sandbox whose container plan a test changes (a fake or delayed agent)."""

    change: PlanChange = staticmethod(lambda p: p)

    def _plan(self, listener: agent_channel.Listener | None = None) -> container_plan.ContainerPlan:
        return type(self).change(super()._plan(listener))


Factory = Callable[..., SessionSandbox]


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    state = tmp_path / "state"
    state.mkdir()
    try:
        yield state
    finally:
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def make_session(make_sandbox: SandboxFactory, state_dir: Path) -> Factory:
    """Session sandboxes whose agent files are staged in a state directory, as a worker's."""

    def make(
        runtime: str = "runc",
        *,
        change: PlanChange | None = None,
        start_timeout_s: float = 60.0,
        **profile: object,
    ) -> SessionSandbox:
        kind: type[SessionSandbox] = SessionSandbox
        if change is not None:
            kind = type("ChangedSession", (_Changed,), {"change": staticmethod(change)})
        sandbox = make_sandbox(
            "session",
            runtime,
            agent_dir=agent_files.stage(state_dir),
            start_timeout_s=start_timeout_s,
            session_class=kind,
            **profile,
        )
        assert isinstance(sandbox, SessionSandbox)
        return sandbox

    return make


def channel_dirs(state_dir: Path) -> list[Path]:
    root = state_dir / agent_channel.ROOT_NAME
    return sorted(root.iterdir()) if root.is_dir() else []


def channel_of(docker_client: docker.DockerClient, sandbox: SessionSandbox) -> Path | None:
    assert sandbox.container_id is not None
    return agent_channel.directory_of(docker_client.api.inspect_container(sandbox.container_id))


def test_hooks_run_over_the_socket_under_runc_and_the_attach_stream_under_runsc(
    make_session: Factory,
    runtime: str,
    workspace: Path,
    state_dir: Path,
    docker_client: docker.DockerClient,
) -> None:
    sandbox = make_session(runtime)
    result = sandbox.run(ExecRequest("cat; env", str(workspace), b"payload\n", {}, 60))
    assert result.outcome is Outcome.OK, result.message
    assert result.stdout.startswith(b"payload\n")
    names = {line.split("=", 1)[0] for line in result.stdout.decode().splitlines()[1:]}
    assert not names & {framing.CHANNEL_SOCKET_ENV, framing.CHANNEL_TOKEN_ENV}
    if runtime == "runsc":
        assert result.attestation["channel"] == "attach"
        assert "gVisor" in result.attestation["channel_reason"]
        assert channel_of(docker_client, sandbox) is None
        assert channel_dirs(state_dir) == []
    else:
        assert result.attestation["channel"] == "socket"
        assert "channel_reason" not in result.attestation
        assert "(init of its own pid namespace)" in result.attestation["channel_peer"]
        mounted = {m["target"]: m for m in result.attestation["mounts"]}
        assert mounted[agent_channel.CONTAINER_DIR]["mode"] == "ro"
        directory = channel_of(docker_client, sandbox)
        assert directory is not None and channel_dirs(state_dir) == [directory]
        st = os.lstat(directory)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o700)
        # the agent is connected: the socket is gone, nothing else can connect
        assert list(directory.iterdir()) == []
    sandbox.close()
    assert channel_dirs(state_dir) == []


def test_the_agent_is_awaited_when_the_process_holds_descriptors_past_1024(
    make_session: Factory, workspace: Path
) -> None:
    """A daemon with thousands of connections opens its session channels on descriptors
    past select()'s limit; waiting for the agent's hello must not care."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        # the daemon raises its soft limit to the hard one, no further: with a hard limit
        # this low no process here, the daemon included, has a descriptor past 1024
        pytest.skip(f"the hard RLIMIT_NOFILE is {hard}: no descriptor past 1024 can exist")
    top = 2048 if hard == resource.RLIM_INFINITY else min(hard, 2048)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, top), hard))
    held: list[int] = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        sandbox = make_session()
        try:
            result = sandbox.run(ExecRequest("cat", str(workspace), b"high\n", {}, 60))
        finally:
            sandbox.close()
        assert result.outcome is Outcome.OK, result.message
        assert result.stdout == b"high\n"
        assert result.attestation["channel"] == "socket"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_replaced_container_s_directory_goes_with_it(
    make_session: Factory, workspace: Path, state_dir: Path, docker_client: docker.DockerClient
) -> None:
    sandbox = make_session()
    next_hook_runs(sandbox, workspace)
    old, old_dir = sandbox.container_id, channel_of(docker_client, sandbox)
    assert old is not None and old_dir is not None
    docker_client.api.kill(old)
    docker_client.api.wait(old, timeout=60)
    # This run finds the channel closed (sandbox_error) or the container replaced already.
    sandbox.run(ExecRequest("true", str(workspace), timeout_s=60))
    next_hook_runs(sandbox, workspace)
    assert sandbox.container_id != old
    new_dir = channel_of(docker_client, sandbox)
    assert new_dir is not None and new_dir != old_dir
    assert channel_dirs(state_dir) == [new_dir]


HOSTILE = r"""
import errno, json, os, socket
found = {}
def attempt(name, action):
    try:
        action()
        found[name] = "allowed"
    except OSError as exc:
        found[name] = errno.errorcode.get(exc.errno, str(exc))
d = "/opt/cloudrunner-channel"
def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(d + "/agent.sock")
    s.sendall(b"\0\0\0\2\0\0\0\0{}")
attempt("connect", connect)
attempt("list", lambda: os.listdir(d))
attempt("stat", lambda: os.stat(d + "/agent.sock"))
attempt("write", lambda: open(d + "/planted", "w").close())
attempt("replace", lambda: os.symlink("/tmp/elsewhere", d + "/agent.sock"))
attempt("bind", lambda: socket.socket(socket.AF_UNIX).bind(d + "/agent.sock"))
attempt("rename", lambda: os.rename(d, "/tmp/channel"))
attempt("chmod", lambda: os.chmod(d, 0o777))
attempt("agent_fds", lambda: os.listdir("/proc/1/fd"))
print(json.dumps(found))
"""


def test_a_hostile_hook_cannot_reach_list_or_replace_the_channel(
    make_session: Factory, docker_client: docker.DockerClient
) -> None:
    sandbox = make_session(user=10001, group=10001)
    next_hook_runs_in_tmp(sandbox)
    directory = channel_of(docker_client, sandbox)
    assert directory is not None
    # A listening socket where the agent's was: the hook has something to try to reach.
    bait = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        bait.bind(f"/proc/self/fd/{fd}/{agent_channel.SOCKET_NAME}")
        os.chmod(agent_channel.SOCKET_NAME, 0o600, dir_fd=fd)
        bait.listen(4)
        result = sandbox.run(ExecRequest(f"python3 -c '{HOSTILE}'", "/tmp", timeout_s=60))
        assert result.outcome is Outcome.OK, result.message + result.stderr.decode()
        found = json.loads(result.stdout)
        assert found["connect"] == "EACCES"
        assert found["list"] == "EACCES"
        assert found["stat"] == "EACCES"
        assert found["agent_fds"] == "EACCES"
        for name in ("write", "replace", "bind", "rename", "chmod"):
            assert found[name] != "allowed", name
        bait.setblocking(False)
        with pytest.raises(BlockingIOError):
            bait.accept()  # nobody connected
        assert sorted(p.name for p in directory.iterdir()) == [agent_channel.SOCKET_NAME]
        st = os.lstat(directory)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o700)
    finally:
        bait.close()
        os.close(fd)
    next_hook_runs_in_tmp(sandbox)


def next_hook_runs_in_tmp(sandbox: SessionSandbox) -> ExecResult:
    result = sandbox.run(ExecRequest("id -u", "/tmp", timeout_s=60))
    assert result.outcome is Outcome.OK, result.message
    assert result.attestation["channel"] == "socket"
    return result


def _delayed_until(go: Path) -> PlanChange:
    """The real agent, started once `go` exists in the (mounted) workspace."""

    def change(p: container_plan.ContainerPlan) -> container_plan.ContainerPlan:
        wait = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
        return dataclasses.replace(p, command=[*p.command[:-1], wait + p.command[-1]])

    return change


def test_a_peer_that_is_not_the_agent_is_refused_and_the_agent_still_connects(
    make_session: Factory, workspace: Path, state_dir: Path
) -> None:
    go = workspace / "go"
    sandbox = make_session(change=_delayed_until(go))
    results: list[ExecResult] = []
    runner = threading.Thread(
        target=lambda: results.append(
            sandbox.run(ExecRequest("echo agent", str(workspace), timeout_s=60))
        )
    )
    runner.start()
    try:
        directory = _wait_for_socket(state_dir, runner)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with socket.socket(socket.AF_UNIX) as impostor:
                impostor.connect(f"/proc/self/fd/{fd}/{agent_channel.SOCKET_NAME}")
                impostor.sendall(framing.encode({"op": "hello", "token": "0" * 32}))
                impostor.settimeout(60)
                try:
                    answer = impostor.recv(1)
                except ConnectionResetError:  # closed with the impostor's hello unread
                    answer = b""
                assert answer == b""  # refused: closed without an answer
        finally:
            os.close(fd)
    finally:
        go.touch()
        runner.join(120)
    assert results and results[0].outcome is Outcome.OK, results[0].message
    assert results[0].stdout == b"agent\n"
    assert results[0].attestation["channel"] == "socket"


def _wait_for_socket(state_dir: Path, runner: threading.Thread) -> Path:
    def channel() -> Path | None:
        if not runner.is_alive():
            raise AssertionError("the sandbox finished before its socket appeared")
        dirs = channel_dirs(state_dir)
        return next((d for d in dirs if (d / agent_channel.SOCKET_NAME).exists()), None)

    return wait_for(channel, "the sandbox's socket", timeout_s=600, interval_s=0.02)


CONNECTS_TWICE = IMPORT_AGENT + (
    "path = os.environ.pop(framing.CHANNEL_SOCKET_ENV); "
    "token = os.environ.pop(framing.CHANNEL_TOKEN_ENV); "
    "first = socket.socket(socket.AF_UNIX); first.connect(path); "
    "second = socket.socket(socket.AF_UNIX); second.connect(path); "
    "hello = {'op': 'hello', 'version': 1, 'status': agent._own_status(), 'token': token}; "
    "first.sendall(framing.encode(hello))\n"
    "import threading\n"
    "def probe():\n"
    "    try:\n"
    "        second.sendall(framing.encode(hello))\n"
    "        ended = 'eof' if second.recv(1) == b'' else 'answered'\n"
    "    except OSError as exc:\n"
    "        ended = type(exc).__name__\n"
    "    os.write(2, ('second connection: ' + ended + chr(10)).encode())\n"
    "threading.Thread(target=probe, daemon=True).start()\n"
    "raise SystemExit(agent.Agent(first.fileno(), first.fileno(), "
    "hello={'channel': 'socket'}).serve())"
)


def test_an_agent_that_connects_twice_gets_one_channel(
    make_session: Factory, workspace: Path
) -> None:
    sandbox = make_session(change=lambda p: dataclasses.replace(p, command=["-c", CONNECTS_TWICE]))
    next_hook_runs(sandbox, workspace)
    container = sandbox._current
    assert container is not None and container.channel == "socket"
    # The second connection was never accepted: the listener's end reset it (its hello
    # found the connection reset or, when the listener had closed first, the pipe broken).
    came_true(lambda: "second connection:" in container.stderr_tail, 60, 0.05)  # judged below
    ended = container.stderr_tail.partition("second connection: ")[2].split("\n")[0]
    assert ended in ("ConnectionResetError", "BrokenPipeError"), container.stderr_tail
    next_hook_runs(sandbox, workspace)


def test_an_agent_that_never_connects_is_reported_and_cleaned_up(
    make_session: Factory,
    workspace: Path,
    state_dir: Path,
    docker_tracker: DockerTracker,
) -> None:
    # it never connects: it sleeps (not a wait for anything) until the sandbox is removed
    silent = "import sys, time; print('silent agent here', file=sys.stderr); time.sleep(3600)"
    sandbox = make_session(
        change=lambda p: dataclasses.replace(p, command=["-c", silent]), start_timeout_s=3
    )
    result = sandbox.run(ExecRequest("true", str(workspace), timeout_s=60))
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert "did not say hello within 3s" in result.message
    assert "silent agent here" in result.message
    assert docker_tracker.labelled_containers() == []
    assert channel_dirs(state_dir) == []


DIES_AFTER_HELLO = IMPORT_AGENT + (
    "path = os.environ.pop(framing.CHANNEL_SOCKET_ENV); "
    "token = os.environ.pop(framing.CHANNEL_TOKEN_ENV); "
    "s = socket.socket(socket.AF_UNIX); s.connect(path); "
    "s.sendall(framing.encode({'op': 'hello', 'version': 1, 'status': agent._own_status(), "
    "'token': token})); "
    "s.recv(65536); os.write(2, b'dying on purpose\\n'); os._exit(5)"
)


def test_a_dead_agent_is_explained_by_its_stderr_on_the_socket_channel(
    make_session: Factory, workspace: Path
) -> None:
    sandbox = make_session(
        change=lambda p: dataclasses.replace(p, command=["-c", DIES_AFTER_HELLO])
    )
    result = sandbox.run(ExecRequest("true", str(workspace), timeout_s=60))
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert result.attestation["channel"] == "socket"
    assert "(exit 5): dying on purpose" in result.message


def test_an_agent_that_cannot_connect_keeps_the_attach_stream_and_says_why(
    make_session: Factory, workspace: Path, state_dir: Path
) -> None:
    elsewhere = f"{agent_channel.CONTAINER_DIR}/missing.sock"

    def change(p: container_plan.ContainerPlan) -> container_plan.ContainerPlan:
        return dataclasses.replace(p, env={**p.env, framing.CHANNEL_SOCKET_ENV: elsewhere})

    sandbox = make_session(change=change)
    result = sandbox.run(ExecRequest("echo over-attach", str(workspace), timeout_s=60))
    assert result.outcome is Outcome.OK, result.message
    assert result.stdout == b"over-attach\n"
    assert result.attestation["channel"] == "attach"
    assert f"cannot connect to {elsewhere}" in result.attestation["channel_reason"]
    assert channel_dirs(state_dir) == []  # no socket left listening for anyone else


def test_the_reaper_removes_a_session_container_with_its_channel_directory(
    make_session: Factory, workspace: Path, state_dir: Path, docker_client: docker.DockerClient
) -> None:
    sandbox = make_session()
    next_hook_runs(sandbox, workspace)
    cid = sandbox.container_id
    assert cid is not None and len(channel_dirs(state_dir)) == 1
    reaper.remove_container(docker_client, cid)
    with pytest.raises(docker.errors.NotFound):
        docker_client.api.inspect_container(cid)
    assert channel_dirs(state_dir) == []
