"""Which transcript files are shown to hooks, and what the record says otherwise."""

from __future__ import annotations

import json
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


# ------------------------------------------------------------- the last assistant message

CURSOR_LINES = [
    {"role": "user", "message": {"content": [{"type": "text", "text": "fix the test"}]}},
    {"role": "assistant", "message": {"content": [{"type": "text", "text": "Looking."}]}},
    {"role": "user", "message": {"content": "and the docs"}},
    {"role": "assistant", "message": {"content": [
        {"type": "text", "text": "Done: the test passes."},
        {"type": "tool_use", "name": "Shell", "input": {"command": "pytest"}},
        {"type": "text", "text": "Docs updated."},
    ]}},
]  # fmt: skip


def _last(tmp_path: Path, layout: tuple[Path, Path], body: str | bytes) -> str | None:
    file = tmp_path / "t.jsonl"
    file.write_bytes(body if isinstance(body, bytes) else body.encode())
    return transcript.last_assistant_message(_resolve(str(file), layout))


def test_the_last_assistant_message_of_json_lines(
    tmp_path: Path, layout: tuple[Path, Path]
) -> None:
    body = "".join(json.dumps(line) + "\n" for line in CURSOR_LINES)
    assert _last(tmp_path, layout, body) == "Done: the test passes.\nDocs updated."
    flat = '{"role": "assistant", "text": "first"}\n{"type": "assistant", "content": "second"}\n'
    assert _last(tmp_path, layout, flat) == "second"
    # a user line after it does not hide it; a torn last line is passed over
    assert _last(tmp_path, layout, body + '{"role": "user", "text": "thanks"}\n{"role": "as') == (
        "Done: the test passes.\nDocs updated."
    )


def test_a_plain_text_transcripts_last_assistant_block(
    tmp_path: Path, layout: tuple[Path, Path]
) -> None:
    body = "user:\nhi\n\nassistant:\nHello.\n\nuser:\nbye\n\nassistant:\nBye then.\nSee you.\n"
    assert _last(tmp_path, layout, body) == "Bye then.\nSee you."


@pytest.mark.parametrize(
    "body",
    ["", "not json at all\n", '{"role": "user", "text": "only the user"}\n', "[1, 2]\n",
     '{"role": "assistant", "message": {"content": [{"type": "tool_use"}]}}\n',
     '{"role": "assistant", "text": 7}\n', b"\xff\xfe{\n", "[" * 100000 + "\n"],
)  # fmt: skip
def test_no_assistant_message_is_none_and_nothing_raises(
    tmp_path: Path, layout: tuple[Path, Path], body: str | bytes
) -> None:
    assert _last(tmp_path, layout, body) is None


def test_only_the_end_of_a_huge_transcript_is_read(
    tmp_path: Path, layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcript, "TAIL_BYTES", 256)
    early = json.dumps({"role": "assistant", "text": "early"}) + "\n"
    filler = json.dumps({"role": "user", "text": "x" * 50}) + "\n"
    assert _last(tmp_path, layout, early + filler * 10) is None
    assert _last(tmp_path, layout, filler * 10 + early) == "early"


def test_a_transcript_hooks_may_not_see_is_not_read(
    tmp_path: Path, layout: tuple[Path, Path]
) -> None:
    """Hostile: the worker reads as root; it reads nothing a hook could not open itself."""
    secret = layout[0] / "secret.jsonl"  # under the state directory
    secret.write_text(json.dumps({"role": "assistant", "text": "token=abc"}) + "\n")
    assert transcript.last_assistant_message(_resolve(str(secret), layout)) is None
    link = tmp_path / "link.jsonl"
    link.symlink_to(secret)
    assert transcript.last_assistant_message(_resolve(str(link), layout)) is None
    # a file made a symbolic link after it was resolved is not followed either
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"role": "assistant", "text": "fine"}) + "\n")
    shown = _resolve(str(good), layout)
    assert transcript.last_assistant_message(shown) == "fine"
    good.unlink()
    good.symlink_to(secret)
    assert transcript.last_assistant_message(shown) is None
    assert transcript.last_assistant_message(None) is None
