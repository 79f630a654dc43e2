"""An unusable `fail-policy.json` never holds the answer back: with a FIFO, a socket, a
link to a FIFO, a file that never ends (/dev/zero, and a link to it), 200,000 nested `[`,
or a file over the size bound in the policy's place, both clients (the Python `cloudrunner
hook` and the compiled `cloudrunner-hook`, run as separate processes) answer neutrally at
once, with the same documented fail-open line naming the path and its problem."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.two_clients import CLIENTS, Outcome, missing_client

#: a safety net for the test run only: a client still blocked after this has hung (the
#: fix answers at once; without it the FIFO and /dev/zero cases never end)
HUNG_AFTER_S = 60


@pytest.fixture(scope="module", autouse=True)
def _both_clients_installed() -> None:
    why = missing_client()
    if why:
        pytest.fail(why, pytrace=False)


def _run(client: str, directory: Path) -> Outcome:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    sock = directory / "cloudrunner.sock"  # nothing listens: the policy decides
    try:
        proc = subprocess.run(
            [str(CLIENTS[client]), "hook", "beforeShellExecution", "--exit-code",
             "--socket", str(sock), "--timeout", "5"],
            input=b"{}", capture_output=True, env=keep, timeout=HUNG_AFTER_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {client} client hung on the policy file in {directory}")
    return Outcome(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _linked_fifo(path: Path) -> None:
    os.mkfifo(path.with_name("elsewhere.fifo"))
    path.symlink_to(path.with_name("elsewhere.fifo"))


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _deep(path: Path) -> None:
    path.write_bytes(b"[" * 200_000)


def _deep_object(path: Path) -> None:
    path.write_bytes(b'{"version": 1, "fail_closed_events": ' + b"[" * 100 + b"]" * 100 + b"}")


def _huge(path: Path) -> None:
    policy = {"version": 1, "fail_closed_events": ["beforeShellExecution"], "pad": ""}
    text = json.dumps(policy)
    path.write_text(text.replace('""', '"' + "x" * (2 * 1024 * 1024) + '"'))


def _sparse(path: Path) -> None:
    with path.open("wb") as handle:
        handle.truncate(8 << 30)  # 8 GiB of nothing: never read whole


def _directory(path: Path) -> None:
    path.mkdir()


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (_fifo, "not a regular file"),
    "link-to-fifo": (_linked_fifo, "not a regular file"),
    "dev-zero": (_dev_zero, "not a regular file"),
    "deep-nesting": (_deep, "nested deeper than 64 levels"),
    "deep-in-a-valid-policy": (_deep_object, "nested deeper than 64 levels"),
    "huge": (_huge, "larger than 1048576 bytes"),
    "sparse-8-gib": (_sparse, "larger than 1048576 bytes"),
    "directory": (_directory, "not a regular file"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unusable_policy_file_fails_open_at_once_in_both_clients(
    tmp_path: Path, case: str
) -> None:
    make, why = CASES[case]
    policy = tmp_path / "fail-policy.json"
    make(policy)
    outcomes = {client: _run(client, tmp_path) for client in CLIENTS}
    assert outcomes["compiled"] == outcomes["python"], outcomes
    outcome = outcomes["python"]
    assert outcome.code == 0 and json.loads(outcome.stdout) == {"permission": "allow"}
    assert outcome.lines[0].endswith("; letting the event through (fail-open)")
    assert outcome.lines[1] == (
        f"cloudrunner: the fail policy {policy} is not usable ({why}); failing open"
    )


def test_a_socket_in_the_policy_s_place_fails_open_in_both_clients(tmp_path: Path) -> None:
    policy = tmp_path / "fail-policy.json"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(policy))
        listener.listen(1)
        outcomes = {client: _run(client, tmp_path) for client in CLIENTS}
    finally:
        listener.close()
    assert outcomes["compiled"] == outcomes["python"], outcomes
    outcome = outcomes["python"]
    assert outcome.code == 0 and json.loads(outcome.stdout) == {"permission": "allow"}
    assert outcome.lines[1] == (
        f"cloudrunner: the fail policy {policy} is not usable (no such device or address); "
        "failing open"
    )


def test_a_fifo_with_a_writer_that_never_stops_is_not_read(tmp_path: Path) -> None:
    """A FIFO someone keeps writing `[` into: not a regular file, so never read."""
    policy = tmp_path / "fail-policy.json"
    os.mkfifo(policy)
    writer = subprocess.Popen(["sh", "-c", 'while :; do printf "[[[[[[[["; done > "$0"',
                               str(policy)])  # fmt: skip
    try:
        outcomes = {client: _run(client, tmp_path) for client in CLIENTS}
    finally:
        writer.kill()
        writer.wait()
    for outcome in outcomes.values():
        assert outcome.code == 0
        assert outcome.lines[1] == (
            f"cloudrunner: the fail policy {policy} is not usable (not a regular file); "
            "failing open"
        )


def test_a_policy_at_the_bounds_is_still_followed(tmp_path: Path) -> None:
    """Just under both bounds (64 levels, 1 MiB) the policy still decides: the bounds
    refuse only what no daemon writes."""
    policy = tmp_path / "fail-policy.json"
    nested = "[" * 61 + "]" * 61
    text = json.dumps({"version": 1, "fail_closed_events": ["beforeShellExecution"],
                       "extra": "NESTED", "pad": ""}).replace('"NESTED"', nested)  # fmt: skip
    text = text.replace('"pad": ""', '"pad": "' + "x" * (1024 * 1024 - len(text)) + '"')
    policy.write_text(text)
    assert policy.stat().st_size == 1024 * 1024
    outcomes = {client: _run(client, tmp_path) for client in CLIENTS}
    assert outcomes["compiled"] == outcomes["python"], outcomes
    assert outcomes["python"].code == 2
    assert outcomes["python"].lines[0].endswith(f"per {policy})")
