"""cloudrunner/workspace/git_process.py: GitPython imported only where git runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cloudrunner.workspace.git_process import NO_GIT

_ADOPT = """
import sys
from pathlib import Path
from cloudrunner.workspace import WorkspaceError, adopt
assert "git" not in sys.modules, "GitPython imported with the package"
try:
    adopt(Path(sys.argv[1]))
except WorkspaceError as exc:
    print(exc)
"""


def test_without_git_the_package_imports_and_adopting_says_install_git(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    bare = tmp_path / "no-git-here"
    bare.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", _ADOPT, str(checkout)],
        capture_output=True, text=True, env={"PATH": str(bare), "HOME": str(tmp_path)},
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == NO_GIT + "\n"
