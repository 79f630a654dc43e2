"""Which transcript files are shown to hooks, and what the record says otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cloudrunner.event import transcript


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
    assert re.search(why, shown.reason), shown.reason
    assert shown.to_dict()["path"] == path


def test_a_transcript_inside_the_workspace_needs_no_mount(layout: tuple[Path, Path]) -> None:
    inner = layout[1] / "t.jsonl"
    inner.write_text("{}\n")
    shown = _resolve(str(inner), layout)
    assert shown is not None and shown.visible and shown.mount is None
