"""The direct channel's host side (`agent_channel`) and the agent's end of it, with real
sockets and a real agent process (no Docker: tests/integration/sandbox covers containers)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudrunner.sandbox import agent_channel, agent_files, framing
from tests.support.ci import needs_root
from tests.unit.sandbox.test_agent import HOOK_UID, agent_command, agent_root, run_meta

pytestmark = needs_root("the channel needs a root worker")


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[agent_channel.Listener]:
    opened = agent_channel.Listener.open(tmp_path / agent_channel.ROOT_NAME, "session-x")
    try:
        yield opened
    finally:
        opened.remove()


def test_the_directory_is_roots_alone_and_the_socket_owner_only(
    listener: agent_channel.Listener, tmp_path: Path
) -> None:
    root = tmp_path / agent_channel.ROOT_NAME
    for directory in (root, listener.directory):
        st = os.lstat(directory)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o700)
    sock = os.lstat(listener.directory / agent_channel.SOCKET_NAME)
    assert stat.S_ISSOCK(sock.st_mode)
    assert stat.S_IMODE(sock.st_mode) == 0o600
    assert listener.directory.parent == root
    assert listener.mount().read_only
    assert listener.mount().target == agent_channel.CONTAINER_DIR
    assert listener.env()[framing.CHANNEL_SOCKET_ENV] == agent_channel.CONTAINER_SOCKET
    assert len(listener.env()[framing.CHANNEL_TOKEN_ENV]) == 32


def test_a_long_state_directory_does_not_meet_the_socket_address_limit(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100) / ("e" * 100)
    deep.mkdir(parents=True)
    opened = agent_channel.Listener.open(deep / agent_channel.ROOT_NAME, "session-y")
    try:
        assert len(str(opened.directory / agent_channel.SOCKET_NAME)) > 108
        conn, pid, uid = _connect_and_accept(opened)
        conn.close()
        assert (pid, uid) == (os.getpid(), 0)
    finally:
        opened.remove()
    assert not opened.directory.exists()


def _connect_and_accept(opened: agent_channel.Listener) -> tuple[socket.socket, int, int]:
    with socket.socket(socket.AF_UNIX) as client:
        fd = os.open(opened.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            client.connect(f"/proc/self/fd/{fd}/{agent_channel.SOCKET_NAME}")
        finally:
            os.close(fd)
        return opened.accept()


def test_a_root_others_may_enter_is_refused(tmp_path: Path) -> None:
    root = tmp_path / agent_channel.ROOT_NAME
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    with pytest.raises(agent_channel.ChannelUnavailable, match="mode 755, not by uid 0"):
        agent_channel.Listener.open(root, "session-z")
    assert list(root.iterdir()) == []


def test_a_root_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / agent_channel.ROOT_NAME).symlink_to(elsewhere)
    with pytest.raises(agent_channel.ChannelUnavailable, match="not a directory"):
        agent_channel.Listener.open(tmp_path / agent_channel.ROOT_NAME, "session-z")
    assert list(elsewhere.iterdir()) == []


def test_stop_unlinks_the_socket_so_nothing_can_connect(listener: agent_channel.Listener) -> None:
    path = listener.directory / agent_channel.SOCKET_NAME
    listener.stop()
    assert not path.exists()
    fd = os.open(listener.directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with socket.socket(socket.AF_UNIX) as client, pytest.raises(FileNotFoundError):
            client.connect(f"/proc/self/fd/{fd}/{agent_channel.SOCKET_NAME}")
    finally:
        os.close(fd)
    assert listener.directory.is_dir()  # kept (mounted) until its container is removed


def test_the_channel_root_follows_the_staged_agent_files(tmp_path: Path) -> None:
    staged = agent_files.stage(tmp_path / "state")
    assert agent_channel.channel_root(staged) == staged.parent.parent / agent_channel.ROOT_NAME
    assert agent_channel.channel_root(None) is None
    assert agent_channel.channel_root(tmp_path / "somewhere") is None


def test_remove_directory_removes_only_a_channel_directory_holding_at_most_its_socket(
    tmp_path: Path,
) -> None:
    root = tmp_path / agent_channel.ROOT_NAME
    stranger = tmp_path / "not-a-channel"
    stranger.mkdir()
    assert not agent_channel.remove_directory(stranger)
    assert stranger.is_dir()
    busy = root / "session-a-1"
    busy.mkdir(parents=True)
    (busy / "file").write_text("x")
    assert not agent_channel.remove_directory(busy)
    assert (busy / "file").exists()
    link = root / "session-b-1"
    link.symlink_to(stranger)
    assert not agent_channel.remove_directory(link)
    assert stranger.is_dir()
    assert agent_channel.remove_directory(root / "session-gone-1")  # already gone


def test_a_container_s_channel_directory_is_found_by_its_mount() -> None:
    inspected = {
        "Mounts": [
            {"Source": "/ws", "Destination": "/ws"},
            {"Source": "/state/sandbox-channels/s-1", "Destination": agent_channel.CONTAINER_DIR},
        ]
    }
    assert agent_channel.directory_of(inspected) == Path("/state/sandbox-channels/s-1")
    assert agent_channel.directory_of({"Mounts": [{"Source": "/ws", "Destination": "/ws"}]}) is None


@pytest.mark.parametrize(
    ("meta", "problem"),
    [
        ({"op": "hello", "token": "t" * 32}, ""),
        ({"op": "hello", "token": "u" * 32}, "does not carry the channel's token"),
        ({"op": "hello"}, "does not carry the channel's token"),
        ({"op": "result", "token": "t" * 32}, "not a hello"),
    ],
)
def test_only_a_hello_with_the_token_is_the_agent_s(meta: dict[str, str], problem: str) -> None:
    found = agent_channel.check_hello(framing.Frame(meta, b""), "t" * 32)
    assert found.endswith(problem) if problem else found == ""


# -- the agent's end, a real agent process (not in a container) -------------------------


def start_agent(tmp: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        agent_command(agent_root(tmp)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": os.environ["PATH"], **env},
    )


def read_frame(conn: socket.socket, decoder: framing.FrameDecoder) -> framing.Frame:
    while True:
        conn.settimeout(60)
        data = conn.recv(65536)
        assert data, "the agent closed the channel"
        frames = decoder.feed(data)
        if frames:
            assert len(frames) == 1
            return frames[0]


def run_request(request_id: int, command: str) -> bytes:
    return framing.encode(run_meta(request_id, command))


def test_the_agent_answers_on_the_socket_and_its_hooks_never_see_the_channel(
    tmp_path: Path,
) -> None:
    # A short root: the agent connects by path, as in the container.
    opened = agent_channel.Listener.open(None, "unit")
    sock_path = str(opened.directory / agent_channel.SOCKET_NAME)
    proc = start_agent(
        tmp_path,
        {framing.CHANNEL_SOCKET_ENV: sock_path, framing.CHANNEL_TOKEN_ENV: opened.token},
    )
    try:
        conn, pid, _uid = opened.accept()
        assert pid == proc.pid
        decoder = framing.FrameDecoder()
        hello = read_frame(conn, decoder)
        assert agent_channel.check_hello(hello, opened.token) == ""
        assert hello.meta["channel"] == "socket"
        # a duration of its own, so a sleep of another test or run on the host is not counted
        duration = f"300.{os.getpid()}{proc.pid}"
        conn.sendall(run_request(1, f"sleep {duration}"))
        conn.sendall(run_request(2, "env"))
        answer = read_frame(conn, decoder)
        assert answer.meta["id"] == 2
        names = {line.split("=", 1)[0] for line in answer.body.decode().splitlines()}
        assert answer.meta["outcome"] == "ok"
        assert "PATH" in names
        assert not names & {framing.CHANNEL_SOCKET_ENV, framing.CHANNEL_TOKEN_ENV}
        conn.close()  # the host is gone: the agent kills the sleeping hook and exits
        assert proc.wait(timeout=60) == 0
        assert proc.stdout is not None
        assert proc.stdout.read() == b""  # nothing went to stdout
        assert not _processes_of(HOOK_UID, "sleep", duration)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        opened.remove()


def test_an_agent_that_cannot_connect_answers_on_stdout_and_says_why(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such.sock")
    proc = start_agent(
        tmp_path, {framing.CHANNEL_SOCKET_ENV: missing, framing.CHANNEL_TOKEN_ENV: "t" * 32}
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        decoder = framing.FrameDecoder()
        frames: list[framing.Frame] = []
        while not frames:
            data = os.read(proc.stdout.fileno(), 65536)
            assert data
            frames = decoder.feed(data)
        hello = frames[0].meta
        assert hello["channel"] == "attach"
        assert missing in hello["channel_error"]
        assert "token" not in hello
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert proc.stderr is not None
        assert b"cannot connect" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _processes_of(uid: int, name: str, argument: str | None = None) -> list[int]:
    """Live processes of `uid` named `name` (with `argument` among their arguments)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            owner = os.stat(f"/proc/{entry}").st_uid
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if argument is not None and argument not in argv:
            continue
        if owner == uid and comm == name and state != "Z":
            found.append(int(entry))
    return found


def test_only_the_init_of_another_pid_namespace_can_be_an_agent() -> None:
    assert "not the init process" in agent_channel.peer_problem(os.getpid())
    assert "not the init process" in agent_channel.peer_problem(1)  # ours, not a container's
    assert agent_channel.peer_problem(0) == ""  # not visible here: the token decides
