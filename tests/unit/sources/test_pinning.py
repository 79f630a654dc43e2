"""The project hooks digest: what it covers and what changes it, on a real file system."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cloudrunner.cli import main
from cloudrunner.sources import pinning


def repo(tmp_path: Path, commands: list[str]) -> Path:
    root = tmp_path / "repo"
    (root / ".cursor" / "hooks").mkdir(parents=True)
    hooks = {"version": 1, "hooks": {"stop": [{"command": c} for c in commands]}}
    (root / ".cursor" / "hooks.json").write_text(json.dumps(hooks))
    (root / ".cursor" / "hooks" / "a.sh").write_text("echo {}\n")
    (root / ".cursor" / "hooks" / "a.sh").chmod(0o755)
    (root / ".cursor" / "hooks" / "b.py").write_text("print('{}')\n")
    (root / "README.md").write_text("not a hook\n")
    return root


def digest(root: Path) -> pinning.HooksDigest:
    return pinning.compute(root, (root / ".cursor" / "hooks.json").read_bytes())


COMMANDS = [
    ".cursor/hooks/a.sh",
    'python3 "$CURSOR_PROJECT_DIR"/.cursor/hooks/b.py --flag',
    "echo unrelated",
]


def test_covers_the_hooks_file_and_every_named_script(tmp_path: Path) -> None:
    got = digest(repo(tmp_path, COMMANDS))
    assert got.digest.startswith("sha256:") and len(got.digest) == 7 + 64
    assert [(f.path, f.executable) for f in got.files] == [
        (".cursor/hooks.json", False),
        (".cursor/hooks/a.sh", True),
        (".cursor/hooks/b.py", False),
    ]


@pytest.mark.parametrize(
    "change",
    [
        lambda r: (r / ".cursor" / "hooks" / "a.sh").write_text("echo changed\n"),
        lambda r: (r / ".cursor" / "hooks" / "b.py").write_text("print('x')\n"),
        lambda r: (r / ".cursor" / "hooks" / "a.sh").chmod(0o644),
        lambda r: (r / ".cursor" / "hooks.json").write_text(
            (r / ".cursor" / "hooks.json").read_text().replace("unrelated", "other")
        ),
    ],
    ids=["script-content", "interpreted-file", "executable-bit", "hooks-file"],
)
def test_any_change_to_what_runs_changes_the_digest(tmp_path: Path, change: object) -> None:
    root = repo(tmp_path, COMMANDS)
    before = digest(root).digest
    change(root)  # type: ignore[operator]
    assert digest(root).digest != before


def test_files_no_command_names_do_not_change_it(tmp_path: Path) -> None:
    root = repo(tmp_path, COMMANDS)
    before = digest(root).digest
    (root / "README.md").write_text("edited\n")
    (root / "src.py").write_text("new file\n")
    assert digest(root).digest == before


def test_the_same_hooks_in_another_checkout_have_the_same_digest(tmp_path: Path) -> None:
    one = repo(tmp_path / "one", COMMANDS)
    two = repo(tmp_path / "two", COMMANDS)
    assert digest(one).digest == digest(two).digest


def test_a_symlink_out_of_the_repository_is_covered_by_its_target_not_followed(
    tmp_path: Path,
) -> None:
    root = repo(tmp_path, [".cursor/hooks/out.sh"])
    secret = tmp_path / "outside.sh"
    secret.write_text("secret\n")
    os.symlink(secret, root / ".cursor" / "hooks" / "out.sh")
    got = digest(root)
    link = next(f for f in got.files if f.path == ".cursor/hooks/out.sh")
    assert link.link == str(secret)
    before = got.digest
    secret.write_text("changed outside\n")  # not the repository's: not read, not covered
    assert digest(root).digest == before
    (root / ".cursor" / "hooks" / "out.sh").unlink()
    os.symlink(tmp_path / "elsewhere.sh", root / ".cursor" / "hooks" / "out.sh")
    assert digest(root).digest != before  # where it points is covered


@pytest.mark.parametrize(
    ("text", "expected"),
    [("sha256:" + "a" * 64, "sha256:" + "a" * 64), ("A" * 64, "sha256:" + "a" * 64)],
)
def test_normalise_accepts_the_printed_form(text: str, expected: str) -> None:
    assert pinning.normalise(text) == expected


@pytest.mark.parametrize("text", ["", "sha256:abc", "md5:" + "a" * 32, "sha256:" + "g" * 64])
def test_normalise_refuses_what_is_not_a_digest(text: str) -> None:
    with pytest.raises(ValueError, match="is not a hooks digest"):
        pinning.normalise(text)


def test_the_digest_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = repo(tmp_path, COMMANDS)
    assert main(["hooks", "digest", str(root)]) == 0
    assert capsys.readouterr().out.strip() == digest(root).digest
    assert main(["hooks", "digest", "--files", str(root)]) == 0
    assert ".cursor/hooks/a.sh" in capsys.readouterr().out
    assert main(["hooks", "digest", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert main(["hooks", "digest", str(tmp_path)]) == 2
    assert "has no project hooks" in capsys.readouterr().err


#: each form names tools/g.sh, outside the hook directory (which is covered whole anyway)
SHELL_FORMS = [
    "(tools/g.sh)",
    "tools/g.sh; true",
    "tools/g.sh|cat",
    "true && tools/g.sh || false",
    "$CURSOR_PROJECT_DIR/tools/g.sh",
    '"${CURSOR_PROJECT_DIR}"/tools/g.sh 2>&1',
    "{ ./tools/g.sh; }",
    "if true; then tools/g.sh; fi",
    "f() { tools/g.sh; }; f",
    "echo $(tools/g.sh)",
    "sh < tools/g.sh",
    "sh -c 'tools/g.sh; true'",
    "python3 --script=tools/g.sh",
    "ROOT/tools/g.sh",
]


@pytest.mark.parametrize("command", SHELL_FORMS)
def test_a_script_named_with_shell_syntax_is_covered(tmp_path: Path, command: str) -> None:
    root = repo(tmp_path, ["true"])
    (root / "tools").mkdir()
    (root / "tools" / "g.sh").write_text("echo approved\n")
    command = command.replace("ROOT", str(root))
    hooks = {"version": 1, "hooks": {"stop": [{"command": command}]}}
    (root / ".cursor" / "hooks.json").write_text(json.dumps(hooks))
    before = digest(root)
    assert "tools/g.sh" in [f.path for f in before.files]
    (root / "tools" / "g.sh").write_text("echo edited\n")
    assert digest(root).digest != before.digest


def test_every_file_under_the_hook_directory_is_covered(tmp_path: Path) -> None:
    root = repo(tmp_path, [".cursor/hooks/a.sh"])
    (root / ".cursor" / "hooks" / "lib").mkdir()
    (root / ".cursor" / "hooks" / "lib" / "common.sh").write_text("x=1\n")
    before = digest(root).digest
    (root / ".cursor" / "hooks" / "lib" / "common.sh").write_text("x=2\n")  # a sourced sibling
    assert digest(root).digest != before
    assert ".cursor/hooks/lib/common.sh" in [f.path for f in digest(root).files]


def test_operator_globs_add_files(tmp_path: Path) -> None:
    root = repo(tmp_path, [".cursor/hooks/a.sh"])
    (root / "lib" / "deep").mkdir(parents=True)
    (root / "lib" / "deep" / "x.py").write_text("1\n")
    (root / "lib" / "y.txt").write_text("1\n")

    def with_globs(*globs: str) -> pinning.HooksDigest:
        data = (root / ".cursor" / "hooks.json").read_bytes()
        return pinning.compute(root, data, extra_paths=globs)

    assert "lib/deep/x.py" in [f.path for f in with_globs("lib/**/*.py").files]
    assert "lib/y.txt" not in [f.path for f in with_globs("lib/**/*.py").files]
    assert {"lib/deep/x.py", "lib/y.txt"} <= {f.path for f in with_globs("lib").files}
    before = with_globs("lib/**/*.py").digest
    (root / "lib" / "deep" / "x.py").write_text("2\n")
    assert with_globs("lib/**/*.py").digest != before
    assert any("names no file" in n for n in with_globs("missing.py").unseen)


@pytest.mark.parametrize("glob", ["", "/etc/passwd", "../x", "a/../../b"])
def test_a_glob_out_of_the_repository_is_refused(glob: str) -> None:
    with pytest.raises(ValueError, match="not a repository path"):
        pinning.check_glob(glob)


def test_what_the_digest_cannot_see_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path, ["$(cat .cursor/hooks/a.sh)", "eval $CMD", "echo 'unbalanced"])
    # each may run any file: not approvable until every file is covered (fails closed)
    assert main(["hooks", "digest", "--files", str(root)]) == 1
    out = capsys.readouterr().out
    assert "cannot see" in out
    assert "command substitution" in out and "eval" in out and "$CMD" in out
    assert "cannot be parsed" in out
    assert out.count("cannot be approved by its command line alone") == 3
    assert main(["hooks", "digest", "--path", "**", str(root)]) == 0
    assert "--files` lists them" in capsys.readouterr().err


def test_the_digest_carries_its_version(tmp_path: Path) -> None:
    """Version 2 digests differ from version 1 ones: approvals are taken again."""
    root = repo(tmp_path, COMMANDS)
    assert pinning.DIGEST_VERSION == 2
    assert "digest version 2" in digest(root).render()


def test_odd_entries_in_the_hook_directory_are_covered_without_being_opened(
    tmp_path: Path,
) -> None:
    """A FIFO (opening it would block), a symlinked directory out of the repository (not
    walked) and a link loop: each is covered by what it is, and nothing hangs."""
    root = repo(tmp_path, [".cursor/hooks/a.sh"])
    hooks = root / ".cursor" / "hooks"
    os.mkfifo(hooks / "pipe")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "big.sh").write_text("outside\n")
    os.symlink(tmp_path / "outside", hooks / "linked-dir")
    os.symlink(hooks / "loop", hooks / "loop")
    got = digest(root)
    paths = {f.path: f for f in got.files}
    assert paths[".cursor/hooks/linked-dir"].link == str(tmp_path / "outside")
    assert paths[".cursor/hooks/loop"].link == str(hooks / "loop")
    assert ".cursor/hooks/pipe" in paths
    assert not any("outside/big.sh" in p or "linked-dir/" in p for p in paths)
    assert any("pipe is not a regular file" in note for note in got.unseen)


def test_a_hook_directory_that_is_a_link_is_reported_not_walked(tmp_path: Path) -> None:
    root = repo(tmp_path, ["true"])
    (root / ".cursor" / "hooks").rename(tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", root / ".cursor" / "hooks")
    got = digest(root)
    assert [f.path for f in got.files] == [".cursor/hooks.json"]
    assert any(".cursor/hooks is a symbolic link" in note for note in got.unseen)


def test_a_glob_that_matches_too_much_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = repo(tmp_path, ["true"])
    for i in range(5):
        (root / f"f{i}.txt").write_text("x")
    monkeypatch.setattr(pinning, "MAX_COVERED_FILES", 4)
    data = (root / ".cursor" / "hooks.json").read_bytes()
    with pytest.raises(pinning.DigestError, match=r"narrow sources\.project_digest_paths"):
        pinning.compute(root, data, extra_paths=["**"])
