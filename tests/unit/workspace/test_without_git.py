"""The workspace package's git-free parts load without GitPython: `cloudrunner --version`
and the images' repository reading run where git is absent (the worker image's build stage)."""

from __future__ import annotations

import subprocess
import sys


def test_the_cli_and_the_images_do_not_import_gitpython_until_a_git_name_is_used() -> None:
    code = (
        "import sys, cloudrunner.cli, cloudrunner.images, cloudrunner.workspace as w;"
        "assert 'git' not in sys.modules, 'git imported early';"
        "w.clone; assert 'git' in sys.modules;"
        "from cloudrunner.workspace import adopt, resolve_root, DEFAULT_GIT_TIMEOUT;"
        "assert callable(adopt) and callable(resolve_root) and DEFAULT_GIT_TIMEOUT > 0"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_version_answers_where_git_cannot_run() -> None:
    env = {"GIT_PYTHON_GIT_EXECUTABLE": "/nonexistent/git", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "--version"], capture_output=True, text=True,
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("cloudrunner ")


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import cloudrunner.workspace as workspace

    try:
        workspace.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name was found")
