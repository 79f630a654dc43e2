"""No host file outside a checkout is opened because the repository names it: validate's
program look-up and the pinned digest, watched with inotify on the outside file."""

from __future__ import annotations

import os
from pathlib import Path

from cloudrunner import pinning
from cloudrunner.validate import checks as validate_checks
from tests.support.git_repos import write_hooks
from tests.support.inotify_watch import opens_of


def _repo_linking_outside(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside" / "secret.sh"
    outside.parent.mkdir()
    outside.write_text("#!/usr/bin/env secret-interpreter\r\necho host file\n")
    outside.chmod(0o755)
    root = tmp_path / "repo"
    (root / ".cursor" / "hooks").mkdir(parents=True)
    os.symlink(outside, root / ".cursor" / "hooks" / "x.sh")
    commands = [".cursor/hooks/x.sh", f"sh {outside}", "python3 < .cursor/hooks/x.sh"]
    return write_hooks(root, {"stop": [{"command": c} for c in commands]}), outside


def test_validate_checks_never_open_a_file_outside_the_repository(tmp_path: Path) -> None:
    root, outside = _repo_linking_outside(tmp_path)
    with opens_of(outside) as seen:
        programs, scripts = validate_checks.programs_of(".cursor/hooks/x.sh", root)
        problems = [validate_checks.script_problem(s) for s in scripts]
        assert validate_checks.shebang_program(root / ".cursor/hooks/x.sh", root) == (None, False)
    assert seen == []
    assert all(p.name != "secret-interpreter" for p in programs)
    assert problems == [None]


def test_the_digest_never_opens_a_file_outside_the_repository(tmp_path: Path) -> None:
    root, outside = _repo_linking_outside(tmp_path)
    with opens_of(outside) as seen:
        got = pinning.compute(root, (root / ".cursor" / "hooks.json").read_bytes())
    assert seen == []
    assert [f.path for f in got.files] == [".cursor/hooks.json", ".cursor/hooks/x.sh"]
    assert got.files[1].link == str(outside)


def test_the_watch_sees_an_open(tmp_path: Path) -> None:
    """The helper itself: an open of the file is seen (so an empty list means none)."""
    _, outside = _repo_linking_outside(tmp_path)
    with opens_of(outside) as seen:
        outside.read_bytes()
    assert "OPEN" in seen
