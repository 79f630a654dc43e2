"""The installed `cloudrunner` launcher run as `python3 -IS` (no site): the client finds its
package, answers over a real unix socket and imports only the standard library's basics;
other commands load `site` after all."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALLED = Path(sys.executable).with_name("cloudrunner")
ANSWER = b'{"permission":"allow","agent_message":"ok \xc3\xa9"}'
#: what the per-event fast path must never import (each costs 1-10 ms at start-up)
HEAVY = {"os", "json", "re", "argparse", "enum", "typing", "site", "socket", "encodings.idna"}


class OneAnswerServer:
    """A unix socket that reads one HTTP request per connection and answers `ANSWER`."""

    def __init__(self, path: Path) -> None:
        self.requests: list[bytes] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + body)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"x-cloudrunner-blocked: false\r\nContent-Length: %d\r\n"
                    b"Connection: close\r\n\r\n" % len(ANSWER) + ANSWER
                )

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[OneAnswerServer, Path]]:
    path = tmp_path / "cloudrunner.sock"  # the default name under a state dir
    srv = OneAnswerServer(path)
    try:
        yield srv, path
    finally:
        srv.close()


def imported(stderr: str) -> set[str]:
    """Module names from `python -X importtime` output."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def test_the_installed_launcher_is_ours() -> None:
    text = INSTALLED.read_text()
    assert "from cloudrunner.commands.hook import main" in text
    assert "import re" not in text, "a generated console-script wrapper (imports re) is installed"


def test_hook_under_IS_passes_the_answer_through_and_imports_nothing_heavy(
    server: tuple[OneAnswerServer, Path],
) -> None:
    srv, path = server
    payload = b'{"hook_event_name":"beforeShellExecution","command":"ls"}'
    proc = subprocess.run(
        [sys.executable, "-IS", "-X", "importtime", str(INSTALLED), "hook",
         "beforeShellExecution"],
        input=payload, capture_output=True, env={"CLOUDRUNNER_SOCKET": str(path)},
        check=False, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == ANSWER + b"\n"  # passed through byte for byte, not re-encoded
    names = imported(proc.stderr.decode())
    assert "cloudrunner.client" in names
    assert not names & HEAVY, names & HEAVY
    assert "cloudrunner.cli" not in names
    assert srv.requests[0].startswith(b"POST /v1/events/beforeShellExecution HTTP/1.1\r\n")
    assert srv.requests[0].endswith(payload)


def test_the_launcher_reads_the_socket_from_the_state_dir_without_os(
    server: tuple[OneAnswerServer, Path],
) -> None:
    _, path = server
    proc = subprocess.run(
        [sys.executable, "-IS", str(INSTALLED), "hook", "stop"], input=b"{}",
        capture_output=True, env={"CLOUDRUNNER_STATE_DIR": f"{path.parent}/"},
        check=False, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == ANSWER + b"\n"


def test_no_daemon_under_IS_still_answers_by_policy_with_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-IS", str(INSTALLED), "hook", "beforeShellExecution",
         "--socket", str(tmp_path / "none.sock"), "--fail-closed", "--exit-code"],
        input=b"{}", capture_output=True, check=False, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert b'"permission":"deny"' in proc.stdout
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 2 and "fail-closed" in lines[0]  # the problem, then the block


@pytest.mark.parametrize("flags", [["-IS"], []], ids=["IS", "site"])
def test_other_commands_load_site_and_run(flags: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, *flags, str(INSTALLED), "--version"],
        capture_output=True, check=False, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().startswith("cloudrunner ")


def test_a_launcher_away_from_its_environment_falls_back_to_site(
    tmp_path: Path, server: tuple[OneAnswerServer, Path]
) -> None:
    """A copy with no site-packages beside it (e.g. a symlinked or hand-copied command)."""
    _, path = server
    copy = tmp_path / "bin" / "cloudrunner"
    copy.parent.mkdir()
    shutil.copy(REPO / "launcher" / "cloudrunner", copy)
    proc = subprocess.run(
        [sys.executable, "-IS", "-X", "importtime", str(copy), "hook", "stop"], input=b"{}",
        capture_output=True, env={"CLOUDRUNNER_SOCKET": str(path)}, check=False, timeout=60,
    )  # fmt: skip
    if proc.returncode != 0 and b"No module named 'cloudrunner'" in proc.stderr:
        pytest.skip("cloudrunner is not installed in this interpreter's site-packages")
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == ANSWER + b"\n"
    assert "site" in imported(proc.stderr.decode())


def test_the_launcher_run_by_a_bare_name_from_its_directory_finds_its_environment(
    server: tuple[OneAnswerServer, Path],
) -> None:
    _, path = server
    proc = subprocess.run(
        [sys.executable, "-IS", "-X", "importtime", INSTALLED.name, "hook", "stop"],
        input=b"{}", capture_output=True, cwd=INSTALLED.parent,
        env={"CLOUDRUNNER_SOCKET": str(path)}, check=False, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == ANSWER + b"\n"
    assert "site" not in imported(proc.stderr.decode())  # found beside it, not by site
