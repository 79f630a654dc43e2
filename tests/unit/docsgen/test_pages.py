"""The generated reference pages match the code, and the site builds strictly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docsgen.__main__ import DOCS, main, pages

ROOT = Path(__file__).resolve().parents[3]


def test_committed_reference_pages_are_what_the_code_gives(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--check"]) == 0, capsys.readouterr().err


def test_check_fails_and_names_a_stale_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(DOCS, tmp_path / "docs")
    stale = tmp_path / "docs" / "reference" / "settings.md"
    text = stale.read_text()
    stale.write_text(text.replace("### `profile` {#profile}", "### `profiles` {#profile}"))
    assert main(["--check", "--docs", str(tmp_path / "docs")]) == 1
    err = capsys.readouterr().err
    assert "reference/settings.md" in err and "run `python -m docsgen`" in err
    assert main(["--docs", str(tmp_path / "docs")]) == 0
    assert main(["--check", "--docs", str(tmp_path / "docs")]) == 0


def test_every_setting_and_command_is_on_its_page() -> None:
    from cloudrunner.cli import build_parser
    from cloudrunner.settings import ENV_KEYS

    rendered = {name: render() for name, render in pages().items()}
    for variable in ENV_KEYS:
        assert f"`{variable}`" in rendered["reference/settings.md"], variable
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for command in commands:
        assert f"`cloudrunner {command}`" in rendered["reference/cli.md"], command


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    # strict (and not -q, which hides the warnings strict counts): a broken link, a
    # missing anchor or a page left out of the nav fails the build
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "reference" / "protocol" / "index.html").is_file()


def test_an_orphan_page_fails_the_strict_build(tmp_path: Path) -> None:
    shutil.copytree(DOCS, tmp_path / "docs")
    (tmp_path / "docs" / "orphan.md").write_text("# Not in the nav\n")
    config = (
        (ROOT / "mkdocs.yml")
        .read_text()
        .replace("docs_dir: docs", f"docs_dir: {tmp_path / 'docs'}")
    )
    (tmp_path / "mkdocs.yml").write_text(config)
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml"),
         "-d", str(tmp_path / "site")],
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert result.returncode != 0
    assert "orphan.md" in result.stderr


def test_a_stale_generated_part_of_a_hand_written_page_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cloudrunner.audit.records import RecordKind

    shutil.copytree(DOCS, tmp_path / "docs")
    guide = tmp_path / "docs" / "guides" / "audit.md"
    assert "| `egress` |" in guide.read_text()  # every kind, from the code
    guide.write_text(guide.read_text().replace("| `egress` |", "| `egres` |"))
    assert main(["--check", "--docs", str(tmp_path / "docs")]) == 1
    assert "guides/audit.md" in capsys.readouterr().err
    assert main(["--docs", str(tmp_path / "docs")]) == 0
    for kind in RecordKind:
        assert f"| `{kind.value}` |" in guide.read_text()


def test_an_unknown_generated_part_is_named(tmp_path: Path) -> None:
    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "guides" / "audit.md"
    page.write_text(page.read_text() + "\n<!-- docsgen: nope -->\n<!-- /docsgen: nope -->\n")
    with pytest.raises(SystemExit, match="unknown generated part 'nope'"):
        main(["--check", "--docs", str(tmp_path / "docs")])


def test_the_ci_guide_shows_the_workflow_file_as_it_is() -> None:
    guide = (DOCS / "guides" / "ci.md").read_text()
    opening = '```yaml title=".github/workflows/hook-tests.yml"\n'
    shown = guide.split(opening, 1)[1].split("\n```\n", 1)[0] + "\n"
    assert shown == (ROOT / "examples" / "ci" / "hook-tests.yml").read_text()


def test_the_ci_guide_lists_the_action_inputs_as_they_are() -> None:
    import re

    import yaml

    inputs = yaml.safe_load((ROOT / "action.yml").read_text())["inputs"]
    guide = (DOCS / "guides" / "ci.md").read_text()
    table = guide.split("| input | default | what it does |", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `([a-z-]+)` \|", table, re.M)
    assert listed == list(inputs)


def test_every_setting_has_its_anchor_and_a_toml_example_that_loads(tmp_path: Path) -> None:
    """The settings reference: one section per key, with an anchor of its own and a TOML
    example that the worker's own settings loader accepts."""
    import re
    import tomllib

    from cloudrunner.settings import ENV_KEYS, load_settings

    page = (DOCS / "reference" / "settings.md").read_text()
    sections = re.findall(r"^### `([\w.]+)` \{#([\w-]+)\}\n(.*?)```toml\n(.*?)```", page,
                          re.M | re.S)  # fmt: skip
    keys = [key for key, _anchor, _text, _toml in sections]
    assert len(keys) == len(set(keys)) and set(ENV_KEYS.values()) <= set(keys)
    anchors = [anchor for _key, anchor, _text, _toml in sections]
    assert len(anchors) == len(set(anchors))
    for key, _anchor, _text, example in sections:
        file = tmp_path / "settings.toml"
        file.write_text(example)
        load_settings(file, environ={})  # the worker takes it as it is
        document = tomllib.loads(example)
        node = document
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, f"{key}: {example}"
            node = node[part]


def test_the_protocol_page_lists_every_diagnostic_code_with_its_meaning() -> None:
    from cloudrunner.protocol.diagnostic_codes import MEANINGS, DiagnosticCode

    page = (DOCS / "reference" / "protocol.md").read_text()
    for code in DiagnosticCode:
        assert f"| `{code.value}` | {MEANINGS[code]} |" in page, code


def test_the_site_has_an_address_for_its_sitemap_and_takes_a_published_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without site_url the sitemap is empty; the project names no public address, so a
    local build uses mkdocs serve's and a published build sets it in the environment."""
    from mkdocs.config import load_config

    monkeypatch.delenv("CLOUDRUNNER_DOCS_URL", raising=False)
    monkeypatch.delenv("CLOUDRUNNER_REPO_URL", raising=False)
    local = load_config(str(ROOT / "mkdocs.yml"))
    assert local["site_url"] == "http://127.0.0.1:8000/"
    assert local["repo_url"] is None
    monkeypatch.setenv("CLOUDRUNNER_DOCS_URL", "https://docs.example.org/cr/")
    monkeypatch.setenv("CLOUDRUNNER_REPO_URL", "https://git.example.org/cr")
    published = load_config(str(ROOT / "mkdocs.yml"))
    assert published["site_url"] == "https://docs.example.org/cr/"
    assert published["repo_url"] == "https://git.example.org/cr"
