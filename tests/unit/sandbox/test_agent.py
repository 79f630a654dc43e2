"""The agent's protocol, run as a plain child process (no Docker, not PID 1).

Needs root (the agent drops each hook to an unprivileged uid). Outside a container the
agent never sweeps stray processes, so these tests cover framing, caps, timeouts and
process-group kills; the container behaviour is in tests/integration/sandbox.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cloudrunner.sandbox import framing
from tests.support.ci import needs_root

pytestmark = needs_root("the agent needs root to drop uid")

REPO = Path(__file__).resolve().parents[3]
HOOK_UID = 10001


def run_meta(request_id: int, command: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """A run request's fields as the worker sends them, for a hook of HOOK_UID in /tmp."""
    return {
        "op": "run",
        "id": request_id,
        "command": command,
        "cwd": "/tmp",
        "env": dict(env or {}),
        "timeout_s": 20.0,
        "uid": HOOK_UID,
        "gid": HOOK_UID,
        "stdout_cap": 1 << 20,
        "stderr_cap": 1 << 20,
        "nofile": 256,
        "fsize": 1 << 20,
    }


def agent_root(tmp: Path) -> Path:
    """The two agent files alone, laid out as in the container: proves they are stdlib-only."""
    package = tmp / "agent-root" / "cloudrunner" / "sandbox"
    package.mkdir(parents=True)
    for name in ("agent.py", "framing.py"):
        shutil.copy(REPO / "cloudrunner" / "sandbox" / name, package / name)
    return tmp / "agent-root"


def agent_command(root: Path) -> list[str]:
    """How the agent in `root` (see `agent_root`) is started, as in the container."""
    return [
        sys.executable,
        "-I",
        "-S",
        "-B",
        "-c",
        f"import sys; sys.path.insert(0, {str(root)!r}); "
        "from cloudrunner.sandbox.agent import main; raise SystemExit(main())",
    ]


class AgentProcess:
    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            agent_command(root),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.decoder = framing.FrameDecoder()
        self.backlog: list[framing.Frame] = []
        self.next_id = 0

    def read_frame(self) -> framing.Frame:
        assert self.proc.stdout is not None
        while not self.backlog:
            data = os.read(self.proc.stdout.fileno(), 65536)
            assert data, "the agent closed its stdout"
            self.backlog.extend(self.decoder.feed(data))
        return self.backlog.pop(0)

    def send(self, command: str, stdin: bytes = b"", **fields: Any) -> int:
        assert self.proc.stdin is not None
        self.next_id += 1
        meta = run_meta(self.next_id, command, env={"GREETING": "hi"})
        meta.update(fields)
        self.proc.stdin.write(framing.encode(meta, stdin))
        self.proc.stdin.flush()
        return self.next_id

    def run(self, command: str, stdin: bytes = b"", **fields: Any) -> framing.Frame:
        self.send(command, stdin, **fields)
        return self.read_frame()

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


@pytest.fixture
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    process = AgentProcess(agent_root(tmp_path_factory.mktemp("agent")))
    hello = process.read_frame()
    assert hello.meta["op"] == "hello"
    assert hello.meta["version"] == framing.PROTOCOL_VERSION
    try:
        yield process
    finally:
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait()


def out(frame: framing.Frame) -> bytes:
    return frame.body[: frame.meta["stdout_len"]]


def err(frame: framing.Frame) -> bytes:
    return frame.body[frame.meta["stdout_len"] :]


def test_stdin_goes_in_and_stdout_comes_back_byte_exact(agent: AgentProcess) -> None:
    payload = bytes(range(256)) * 1000
    frame = agent.run("cat", payload)
    assert frame.meta["outcome"] == "ok"
    assert frame.meta["exit_code"] == 0
    assert out(frame) == payload


def test_the_hook_runs_as_the_hook_uid_with_the_given_env(agent: AgentProcess) -> None:
    frame = agent.run('id -u; id -G; echo "$GREETING"; pwd')
    assert out(frame).decode().split() == [str(HOOK_UID), str(HOOK_UID), "hi", "/tmp"]


def test_exit_codes_and_stderr_are_reported(agent: AgentProcess) -> None:
    frame = agent.run("echo oops >&2; exit 7")
    assert frame.meta["outcome"] == "error"
    assert frame.meta["exit_code"] == 7
    assert err(frame) == b"oops\n"


def test_a_timeout_kills_the_whole_process_group(agent: AgentProcess) -> None:
    frame = agent.run("sleep 300 & echo $! >&2; wait", timeout_s=1.0)
    assert frame.meta["outcome"] == "timeout"
    assert frame.meta["exit_code"] is None
    child = int(err(frame))
    # Killed and reaped by the agent: no such process on this host any more, or a zombie
    # that is not ours to wait for.
    state = Path(f"/proc/{child}/stat")
    assert not state.exists() or state.read_text().split(")")[1].split()[0] == "Z"


def test_output_over_the_cap_is_cut_and_the_hook_killed(agent: AgentProcess) -> None:
    frame = agent.run("yes", stdout_cap=1000)
    assert frame.meta["outcome"] == "output_overflow"
    assert len(out(frame)) == 1000


def test_a_missing_working_directory_is_a_spawn_error(agent: AgentProcess) -> None:
    frame = agent.run("true", cwd="/nonexistent/dir")
    assert frame.meta["outcome"] == "spawn_error"
    assert "/nonexistent/dir" in frame.meta["message"]


@pytest.mark.parametrize(
    ("fields", "needle"), [({"uid": 0}, "uid/gid 0"), ({"timeout_s": "x"}, "timeout_s")]
)
def test_bad_requests_are_answered_not_run(
    agent: AgentProcess, fields: dict[str, Any], needle: str
) -> None:
    frame = agent.run("touch /tmp/should-not-exist", **fields)
    assert frame.meta["outcome"] == "spawn_error"
    assert needle in frame.meta["message"]


def test_concurrent_requests_each_get_their_own_answer(agent: AgentProcess) -> None:
    slow = agent.send("sleep 2; echo slow")
    fast = [agent.send("cat", f"fast-{i}".encode()) for i in range(5)]
    frames = {f.meta["id"]: f for f in (agent.read_frame() for _ in range(6))}
    assert out(frames[slow]) == b"slow\n"
    assert [out(frames[i]) for i in fast] == [f"fast-{i}".encode() for i in range(5)]
    # The fast ones were not held behind the slow one.
    assert list(frames)[-1] == slow


def test_closing_the_channel_ends_the_agent_and_its_hooks(agent: AgentProcess) -> None:
    agent.send("sleep 300")
    assert agent.close() == 0


@pytest.mark.parametrize("nofile", [256, 64])  # spawned, forked
def test_hooks_get_default_sigpipe_and_sigxcpu_not_the_agents_ignored_ones(
    agent: AgentProcess, nofile: int
) -> None:
    frame = agent.run("grep ^SigIgn /proc/self/status", nofile=nofile)
    ignored = int(out(frame).split()[1], 16)
    assert not ignored & (1 << 12)  # SIGPIPE is signal 13
    assert not ignored & (1 << 23)  # SIGXCPU is signal 24


def limits_of(frame: framing.Frame) -> dict[str, str]:
    """`cat /proc/self/limits` as {name: soft limit}."""
    rows = out(frame).decode().splitlines()[1:]
    return {row[:26].strip(): row[26:47].strip() for row in rows}


@pytest.mark.parametrize(
    ("nofile", "path"), [(256, "spawned (vfork)"), (64, "forked: fewer files than the agent needs")]
)
def test_both_ways_of_starting_a_hook_apply_every_limit(
    agent: AgentProcess, nofile: int, path: str
) -> None:
    frame = agent.run(
        "cat /proc/self/limits; cat /proc/self/oom_score_adj; id -u; id -G",
        nofile=nofile,
        timeout_s=7.0,
    )
    assert frame.meta["outcome"] == "ok", frame.meta["message"]
    limits = limits_of(frame)
    assert limits["Max open files"] == str(nofile), path
    assert limits["Max file size"] == str(1 << 20)
    assert limits["Max core file size"] == "0"
    assert limits["Max cpu time"] == "9"  # the timeout + 2 s (soft)
    assert out(frame).decode().split()[-3:] == ["1000", str(HOOK_UID), str(HOOK_UID)]


def test_the_agent_is_root_again_after_each_spawn(agent: AgentProcess) -> None:
    first = agent.run("id -u; id -g", uid=HOOK_UID, gid=HOOK_UID)
    second = agent.run("id -u; id -g", uid=HOOK_UID + 1, gid=HOOK_UID + 2)
    assert out(first).split() == [b"10001", b"10001"]
    # only an agent that got uid 0 back could switch to another hook uid
    assert out(second).split() == [b"10002", b"10003"]


def test_a_request_cannot_raise_the_limits_the_agent_holds(agent: AgentProcess) -> None:
    assert agent.run("true").meta["outcome"] == "ok"  # holds nofile 256, fsize 1 MiB now
    frame = agent.run("true", nofile=4096)
    assert frame.meta["outcome"] == "spawn_error"
    assert "cannot raise" in frame.meta["message"]
    assert agent.run("true", fsize=1 << 19).meta["outcome"] == "ok"  # lower is fine


# Every common way a hook script reads its payload or writes its answer by path: on a VM the
# hook's streams are its own to open again; here too, whether it is spawned or forked.
BY_PATH = {
    "cat": "cat /dev/stdin",
    "exec-3": "exec 3</dev/stdin; cat <&3",
    "python": "python3 -c 'import sys; sys.stdout.write(open(\"/dev/stdin\").read())'",
    "proc-fd": "cat /proc/self/fd/0",
}


@pytest.mark.parametrize("nofile", [256, 64])  # spawned, forked
@pytest.mark.parametrize("form", sorted(BY_PATH))
def test_a_hook_opens_its_own_stdin_by_path(agent: AgentProcess, form: str, nofile: int) -> None:
    frame = agent.run(BY_PATH[form], b'{"command": "ls"}', nofile=nofile)
    assert (frame.meta["outcome"], err(frame)) == ("ok", b"")
    assert out(frame) == b'{"command": "ls"}'


@pytest.mark.parametrize("nofile", [256, 64])
def test_a_hook_writes_to_its_stdout_and_stderr_by_path(agent: AgentProcess, nofile: int) -> None:
    frame = agent.run("echo x >/dev/stderr; echo y | tee /dev/stdout", nofile=nofile)
    assert frame.meta["outcome"] == "ok"
    assert (out(frame), err(frame)) == (b"y\ny\n", b"x\n")


def test_the_hooks_pipes_are_its_own_and_the_agent_stays_root(agent: AgentProcess) -> None:
    frame = agent.run("stat -L -c '%u %g %a' /dev/stdin /dev/stdout /dev/stderr", b"in")
    assert out(frame).decode().splitlines() == [f"{HOOK_UID} {HOOK_UID} 600"] * 3
    # another uid's pipes are its own as well: the agent went back to root in between
    frame = agent.run("stat -L -c '%u %g' /dev/stdin", b"in", uid=HOOK_UID + 1, gid=HOOK_UID + 2)
    assert out(frame).split() == [str(HOOK_UID + 1).encode(), str(HOOK_UID + 2).encode()]


def test_a_hook_cannot_open_the_agents_descriptors(agent: AgentProcess) -> None:
    """Hostile: the agent's channel and its ends of the pipes are in its descriptor table."""
    pid = agent.proc.pid
    frame = agent.run(
        f'for f in /proc/{pid}/fd/*; do cat "$f" </dev/null && echo opened $f; done; '
        f"echo x > /proc/{pid}/fd/1 && echo wrote; ls /proc/{pid}/fd && echo listed; true",
        timeout_s=5.0,
    )
    assert b"opened" not in out(frame) and b"wrote" not in out(frame)
    assert b"listed" not in out(frame)
    assert b"Permission denied" in err(frame)
