"""Every `cloudrunner` command line the docs and the README show parses: its subcommand
exists and each flag is one that command takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudrunner.cli import build_parser
from tests.support.doc_commands import CommandLine, command_lines, problems

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_command_line_in_the_docs_parses() -> None:
    calls = [call for page in PAGES for call in command_lines(page, ROOT)]
    assert len(calls) > 100  # the pages show many: finding none would mean a broken reader
    found = [problem for call in calls for problem in problems(call, build_parser())]
    assert not found, "\n".join(found)


def _calls(tmp_path: Path, text: str) -> list[CommandLine]:
    page = tmp_path / "page.md"
    page.write_text(text)
    return list(command_lines(page, tmp_path))


def test_the_reader_finds_commands_across_continuations_pipes_and_prompts(
    tmp_path: Path,
) -> None:
    text = (
        "```sh\n"
        "printf '{\"a\":\n  1}' | cloudrunner hook stop \\\n  --socket s.sock | tee x\n"
        "command -v cloudrunner >/dev/null && .venv/bin/cloudrunner validate . --strict\n"
        "```\n\n"
        "```text\n$ cloudrunner audit verify log\naudit log OK: cloudrunner --not-a-call\n```\n"
    )
    calls = _calls(tmp_path, text)
    assert [c.words for c in calls] == [
        ("hook", "stop", "--socket", "s.sock"),
        ("validate", ".", "--strict"),
        ("audit", "verify", "log"),
    ]
    assert [c.line for c in calls] == [2, 5, 9]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("cloudrunner validate --claude-kode .", "--claude-kode is not a flag"),
        ("cloudrunner audit query log --colums seq", "--colums is not a flag"),
        ("cloudrunner audit nope log", "not a complete cloudrunner command"),
        ("cloudrunner serve --workspace=/w --bogus=1", "--bogus is not a flag"),
    ],
)
def test_a_wrong_flag_or_command_on_a_page_is_caught(
    tmp_path: Path, line: str, message: str
) -> None:
    calls = _calls(tmp_path, f"```sh\n{line}\n```\n")
    found = [p for call in calls for p in problems(call, build_parser())]
    assert len(found) == 1 and message in found[0]


def test_a_command_named_in_a_sentence_is_checked_too(tmp_path: Path) -> None:
    text = (
        "Run `cloudrunner validate --claude-kode DIR` first; `cloudrunner audit` reads logs,\n"
        "and `cloudrunner could not run the hooks` is a message, not a command.\n"
    )
    calls = _calls(tmp_path, text)
    found = [p for call in calls for p in problems(call, build_parser())]
    assert len(calls) == 3 and len(found) == 1 and "--claude-kode" in found[0]
