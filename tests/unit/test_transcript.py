"""Which transcript files are shown to hooks, and what the record says otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudrunner import transcript
from cloudrunner.sandbox.base import SandboxLabels, SandboxSpec
from cloudrunner.sandbox.limits import session_quota
from cloudrunner.sandbox.plan import Mount, data_mounts


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    state, ws = tmp_path / "state", tmp_path / "ws"
    state.mkdir()
    ws.mkdir()
    return state, ws


def _resolve(path: str | None, layout: tuple[Path, Path]) -> transcript.Transcript | None:
    return transcript.resolve(path, state_dir=layout[0], workspace=layout[1])


def test_a_regular_file_is_mounted_at_its_own_path(
    tmp_path: Path, layout: tuple[Path, Path]
) -> None:
    file = tmp_path / "t.jsonl"
    file.write_text("{}\n")
    shown = _resolve(str(file), layout)
    assert shown is not None and shown.visible and shown.mount == file
    assert _resolve(None, layout) is None and _resolve("", layout) is None


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda tmp: "relative/t.jsonl", "not an absolute path"),
        (lambda tmp: str(tmp / "absent.jsonl"), "does not exist"),
        (lambda tmp: str(tmp / "dir"), "not a regular file"),
        (lambda tmp: str(tmp / "link.jsonl"), "symbolic link"),
        (lambda tmp: str(tmp / "linkdir" / "t.jsonl"), "symbolic link"),
        (lambda tmp: str(tmp / "state" / "audit.log"), "state directory"),
        (lambda tmp: str(tmp / "ws" / ".." / "t.jsonl"), "normal form"),
        (lambda tmp: "/proc/self/environ", "symbolic link|/proc"),
        (lambda tmp: "/proc/version", "/proc"),
    ],
)
def test_refused_paths_are_not_mounted_and_say_why(
    tmp_path: Path, layout: tuple[Path, Path], make: object, why: str
) -> None:
    (tmp_path / "t.jsonl").write_text("{}\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "t.jsonl")
    (tmp_path / "linkdir").symlink_to(tmp_path)
    (tmp_path / "state" / "audit.log").write_text("x\n")
    path = make(tmp_path)  # type: ignore[operator]
    shown = _resolve(path, layout)
    assert shown is not None
    assert shown.mount is None and not shown.visible
    import re

    assert re.search(why, shown.reason), shown.reason
    assert shown.to_dict()["path"] == path


def test_a_transcript_inside_the_workspace_needs_no_mount(layout: tuple[Path, Path]) -> None:
    inner = layout[1] / "t.jsonl"
    inner.write_text("{}\n")
    shown = _resolve(str(inner), layout)
    assert shown is not None and shown.visible and shown.mount is None
    spec = SandboxSpec(
        workspace=layout[1], labels=SandboxLabels("w", "s", "project"), transcript=inner
    )
    assert data_mounts(spec) == (Mount(str(layout[1]), str(layout[1]), False),)


def test_home_and_transcript_are_mounted_rw_and_ro(
    tmp_path: Path, layout: tuple[Path, Path]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    file = tmp_path / "t.jsonl"
    file.write_text("{}\n")
    spec = SandboxSpec(
        workspace=layout[1], labels=SandboxLabels("w", "s", "project"), home=home, transcript=file
    )
    mounts = data_mounts(spec)
    assert Mount(str(home), str(home), False) in mounts
    assert Mount(str(file), str(file), True) in mounts


@pytest.mark.parametrize(
    ("per_hook", "parallel", "cores", "fixed", "expected"),
    [
        (1.0, 4, 2, None, 2.0),  # capped at the machine
        (0.5, 4, 8, None, 2.0),  # enough for the parallel hooks
        (1.0, 1, 8, None, 1.0),  # one at a time: one hook's share
        (2.0, 4, 1, None, 2.0),  # never below one hook's share
        (1.0, 4, 8, 1.5, 1.5),  # session_cpus wins
    ],
)
def test_a_session_container_gets_cpu_for_its_parallel_hooks(
    per_hook: float, parallel: int, cores: int, fixed: float | None, expected: float
) -> None:
    assert session_quota(per_hook, parallel, cores, fixed) == expected


def test_the_machine_has_at_least_one_core() -> None:
    from cloudrunner.sandbox.limits import machine_cores

    assert 1 <= machine_cores() <= (os.cpu_count() or 1)
