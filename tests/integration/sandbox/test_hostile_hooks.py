"""Hostile hooks, in both isolation modes and both runtimes: each is contained, reported
with the right outcome, and the next hook still runs."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.sandbox import ExecRequest, HookContainerSandbox, SessionSandbox
from cloudrunner.sandbox.limits import MIB
from tests.integration.sandbox.conftest import SandboxFactory

pytestmark = pytest.mark.docker


def next_hook_runs(sandbox: HookContainerSandbox | SessionSandbox, workspace: Path) -> None:
    result = sandbox.run(ExecRequest("echo still-here", str(workspace), timeout_s=60))
    assert result.outcome is Outcome.OK, result.message
    assert result.stdout == b"still-here\n"


def hook_processes(sandbox: SessionSandbox, workspace: Path) -> list[str]:
    """The commands running in a session container, other than the agent and this probe."""
    result = sandbox.run(ExecRequest("ps -eo pid=,comm=", str(workspace), timeout_s=60))
    assert result.outcome is Outcome.OK, result.message
    rows = [line.split(None, 1) for line in result.stdout.decode().splitlines() if line.strip()]
    return [comm for pid, comm in rows if pid != "1" and comm not in ("sh", "ps")]


def test_a_fork_bomb_is_stopped_by_the_pids_limit(
    make_sandbox: SandboxFactory, isolation: str, runtime: str, workspace: Path
) -> None:
    sandbox = make_sandbox(isolation, runtime, limits={"pids": 64})
    result = sandbox.run(ExecRequest("bomb() { bomb | bomb; }; bomb", str(workspace), timeout_s=10))
    if runtime == "runsc" and isolation == "session":
        # gVisor's own threads count against the pids limit: when the bomb reaches it the
        # whole sandbox aborts (now or moments later), and the session reports that and
        # replaces its container; an event that raced the abort is itself reported.
        assert result.outcome in (Outcome.ERROR, Outcome.TIMEOUT, Outcome.SANDBOX_ERROR)
        for _ in range(5):
            probe = sandbox.run(ExecRequest("echo still-here", str(workspace), timeout_s=60))
            if probe.outcome is Outcome.OK:
                break
            assert probe.outcome is Outcome.SANDBOX_ERROR
            assert "replaced" in probe.message
        assert probe.outcome is Outcome.OK
        assert probe.stdout == b"still-here\n"
        return
    assert result.outcome in (Outcome.ERROR, Outcome.TIMEOUT), result.message
    next_hook_runs(sandbox, workspace)
    if isinstance(sandbox, SessionSandbox):
        assert hook_processes(sandbox, workspace) == []


def test_a_memory_hog_is_killed_as_oom(
    make_sandbox: SandboxFactory, isolation: str, runtime: str, workspace: Path
) -> None:
    sandbox = make_sandbox(isolation, runtime, limits={"memory": "128MiB"})
    hog = "python3 -c 'b = bytearray(512 * 1024 * 1024); b[::4096] = b\"x\" * (len(b) // 4096)'"
    result = sandbox.run(ExecRequest(hog, str(workspace), timeout_s=60))
    assert result.outcome is Outcome.OOM, (result.outcome, result.message, result.stderr)
    assert "memory limit" in result.message
    next_hook_runs(sandbox, workspace)


def test_a_cpu_spinner_past_its_timeout_is_killed(
    make_sandbox: SandboxFactory, isolation: str, runtime: str, workspace: Path
) -> None:
    sandbox = make_sandbox(isolation, runtime)
    result = sandbox.run(ExecRequest("while :; do :; done", str(workspace), timeout_s=2))
    assert result.outcome is Outcome.TIMEOUT
    assert result.exit_code is None
    assert "timeout" in result.message
    if isinstance(sandbox, SessionSandbox):
        assert hook_processes(sandbox, workspace) == []
    next_hook_runs(sandbox, workspace)


def test_100_mib_on_stdout_is_an_overflow_and_the_worker_holds_only_the_cap(
    make_sandbox: SandboxFactory, isolation: str, runtime: str, workspace: Path
) -> None:
    sandbox = make_sandbox(isolation, runtime)
    tracemalloc.start()
    try:
        result = sandbox.run(
            ExecRequest("head -c 104857600 /dev/zero", str(workspace), timeout_s=60)
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.outcome is Outcome.OUTPUT_OVERFLOW, result.message
    assert len(result.stdout) == MIB
    # The cap (1 MiB) plus buffers and copies, nowhere near the 100 MiB printed.
    assert peak < 16 * MIB
    next_hook_runs(sandbox, workspace)


def test_writes_outside_the_workspace_and_tmp_fail(
    make_sandbox: SandboxFactory, isolation: str, runtime: str, workspace: Path
) -> None:
    sandbox = make_sandbox(isolation, runtime)
    script = (
        "for f in /etc/cloudrunner-probe /usr/bin/probe /root/probe /probe /home/hook/probe; do "
        '  (echo x > "$f") 2>/dev/null && echo "wrote $f"; '
        "done; "
        "echo ok > /tmp/probe && cat /tmp/probe; "
        'echo ok > "$PWD/probe" && cat "$PWD/probe"'
    )
    result = sandbox.run(ExecRequest(script, str(workspace), timeout_s=60))
    assert result.stdout.decode().splitlines() == ["ok", "ok"], result.stderr
    assert (workspace / "probe").read_text() == "ok\n"


def test_the_hosts_secret_files_are_not_there(
    make_sandbox: SandboxFactory, isolation: str, runtime: str, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("host-only-secret\n")
    sandbox = make_sandbox(isolation, runtime)
    result = sandbox.run(
        ExecRequest(f"cat /etc/shadow; cat {secret}; echo done", str(workspace), timeout_s=60)
    )
    assert result.stdout.endswith(b"done\n")
    assert b"host-only-secret" not in result.stdout
    host_shadow = Path("/etc/shadow")
    if os.access(host_shadow, os.R_OK):
        root_line = next(
            (ln for ln in host_shadow.read_text().splitlines() if ln.startswith("root:")), ""
        )
        assert root_line.encode() not in result.stdout


def test_the_docker_socket_is_absent(
    make_sandbox: SandboxFactory, isolation: str, runtime: str, workspace: Path
) -> None:
    sandbox = make_sandbox(isolation, runtime)
    script = (
        "for s in /var/run/docker.sock /run/docker.sock; do test -e $s && echo found $s; done; "
        "curl -s --max-time 5 --unix-socket /var/run/docker.sock http://x/version; echo rc=$?"
    )
    result = sandbox.run(ExecRequest(script, str(workspace), timeout_s=60))
    out = result.stdout.decode()
    assert "found" not in out
    assert "ApiVersion" not in out
    assert out.strip().endswith("rc=7")  # curl: could not connect


def test_without_a_network_there_is_only_loopback_and_no_route(
    make_sandbox: SandboxFactory, isolation: str, runtime: str, workspace: Path
) -> None:
    # No packet is sent anywhere: the hook lists its interfaces and routes. Reaching a
    # real server is tested against the test's own network in test_network.py.
    sandbox = make_sandbox(isolation, runtime)
    script = (
        "python3 - <<'EOF'\n"
        "import socket\n"
        "print('interfaces', ' '.join(sorted(n for _, n in socket.if_nameindex())))\n"
        "with open('/proc/net/route') as fh:\n"
        "    print('routes', len(fh.read().splitlines()[1:]))\n"
        "EOF"
    )
    result = sandbox.run(ExecRequest(script, str(workspace), timeout_s=60))
    assert result.stdout.decode().splitlines() == ["interfaces lo", "routes 0"], result.stderr
