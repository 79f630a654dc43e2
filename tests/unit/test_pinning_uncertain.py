"""The pinned digest fails closed: a command whose targets its text cannot tell (a `cd`, a
parameter expansion with a default, `$PWD`, an unset variable, `~`, `eval`, a substitution,
a pattern, a search path, a program that runs what repository files say, a word the parser
cannot read) is not approvable by its command line alone. Each such hook needs every
repository file it may run covered (`sources.project_digest_paths`); until then the hooks do
not load, approved or not, and `validate` and `hooks digest` say which hook and why. On a
real file system and through the real source loader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudrunner import pinning
from cloudrunner.cli import main
from cloudrunner.shell import syntax as shell_syntax
from cloudrunner.sources import SourceSettings, SourceStatus, forget_loaded_sources, load_sources
from tests.support.git_repos import write_hooks

#: each form may run scripts/x.sh (the edited script) without naming it plainly; the glob
#: that covers what it may run
FORMS = {
    "cd": ("cd scripts && ./x.sh", "scripts/**"),
    "default-expansion": ('"${CURSOR_PROJECT_DIR:-.}"/scripts/x.sh', "scripts/**"),
    "alternate-expansion": ('"${CURSOR_PROJECT_DIR:+.}"/scripts/x.sh', "scripts/**"),
    "pwd": ('"$PWD"/scripts/x.sh', "scripts/**"),
    "pwd-braces": ("${PWD}/scripts/x.sh", "scripts/**"),
    "unset-variable": ("$RUNNER/x.sh", "scripts/**"),
    "tilde": ("~/scripts/x.sh", "scripts/**"),
    "pushd": ("pushd scripts >/dev/null && ./x.sh; popd", "scripts/**"),
    "subshell-cd": ("(cd scripts; sh x.sh)", "scripts/**"),
    "cd-in-a-function": ("f() { cd scripts; }; f && ./x.sh", "scripts/**"),
    "cd-then-up": ("cd scripts/sub && ../x.sh", "scripts/**"),
    "cd-then-source": ("cd scripts && . ./x.sh", "scripts/**"),
    "cd-workspace-variable": ('cd "$CURSOR_PROJECT_DIR/scripts" && ./x.sh', "scripts/**"),
    "sh-c-cd": ("sh -c 'cd scripts && ./x.sh'", "scripts/**"),
    "env-C": ("env -C scripts ./x.sh", "scripts/**"),
    "env-chdir": ("env --chdir=scripts ./x.sh", "scripts/**"),
    "git-C": ("git -C scripts status", "scripts/**"),
    "make-C": ("make -C scripts", "**"),
    "make": ("make lint", "**"),
    "npm": ("npm test", "**"),
    "glob": ("sh scripts/*.sh", "scripts/**"),
    "glob-directory": ("sh scr*/x.sh", "scripts/**"),
    "path": ("PATH=scripts:$PATH x.sh", "**"),
    "export-path": ('export PATH="$PWD/scripts:$PATH"; x.sh', "**"),
    "bash-env": ("BASH_ENV=scripts/x.sh bash -c true", None),  # named: certain, covered
    "eval": ("eval ./scripts/x.sh", "**"),
    "eval-variable": ('eval "$CMD"', "**"),
    "command-substitution": ("$(echo ./scripts/x.sh)", "**"),
    "backticks": ("`echo scripts/x.sh`", "**"),
    "bash-c-variable": ('bash -c "$X"', "**"),
    "xargs": ("echo scripts/x.sh | xargs sh", "**"),
    "alias": ("alias x=scripts/x.sh; x", "**"),
    "python-m": ("python3 -m scripts.x", "**"),
    "heredoc-to-python": ("python3 <<EOF\nimport scripts.x\nEOF", "**"),
    "unparsable": ("case x in a) ./scripts/x.sh;; esac", "**"),
    "arithmetic": ("echo $((1)) && sh scripts/x.sh", "**"),
    "ansi-c-quoting": ("sh $'scripts/x.sh'", "**"),
    "brace-expansion": ("sh scripts/{x,y}.sh", "scripts/**"),
    "wrapped-shell-string": ('env sh -c "cd scripts && ./x.sh"', "scripts/**"),
    "nohup-shell-options": ('nohup bash -o errexit -c "cd scripts; ./x.sh"', "scripts/**"),
    "shell-string-after-dashes": ('bash -c -- "cd scripts && ./x.sh"', "scripts/**"),
    "find-exec-shell": ("find . -name x.sh -exec sh -c 'cd scripts; ./x.sh' \\;", "scripts/**"),
    "workspace-variable-set": ("CURSOR_PROJECT_DIR=scripts; $CURSOR_PROJECT_DIR/x.sh", "**"),
    "workspace-variable-loop": (
        "for CURSOR_PROJECT_DIR in scripts; do $CURSOR_PROJECT_DIR/x.sh; done",
        "**",
    ),
    "export-workspace-variable": (
        'export CLAUDE_PROJECT_DIR="$CLAUDE_PROJECT_DIR/scripts"; sh "$CLAUDE_PROJECT_DIR/x.sh"',
        "**",
    ),
    "python-c": ("python3 -c \"import runpy; runpy.run_path('scripts/x.sh')\"", "**"),
    "node-e": ("node -e \"require('child_process').execSync('sh scripts/x.sh')\"", "**"),
    "perl-bundled-e": ("perl -ne 'system q{sh scripts/x.sh}' /dev/null", "**"),
    "awk-system": ("awk 'BEGIN { system(\"sh scripts/x.sh\") }'", "**"),
    "sed-e-command": ("sed -n '1e sh scripts/x.sh' .cursor/hooks.json", "**"),
    "watch": ("watch -n1 'sh scripts/x.sh'", "**"),
    "trap": ("trap 'sh scripts/x.sh' EXIT", "**"),
}


def _repo_with_scripts(tmp_path: Path, command: str) -> Path:
    root = tmp_path / "repo"
    (root / ".cursor").mkdir(parents=True, exist_ok=True)
    (root / "scripts" / "sub").mkdir(parents=True, exist_ok=True)
    (root / "scripts" / "x.sh").write_text("#!/bin/sh\necho approved\n")
    (root / "scripts" / "x.sh").chmod(0o755)
    (root / "README.md").write_text("not a hook\n")
    return write_hooks(root, {"stop": [{"command": "true"}, {"command": command}]})


def _digest(root: Path, *paths: str) -> pinning.HooksDigest:
    data = (root / ".cursor" / "hooks.json").read_bytes()
    return pinning.compute(root, data, extra_paths=paths)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_an_uncertain_command_is_not_approvable_until_what_it_may_run_is_covered(
    tmp_path: Path, form: str
) -> None:
    command, cover = FORMS[form]
    root = _repo_with_scripts(tmp_path, command)
    bare = _digest(root)
    if cover is None:  # the script is named after all: covered, approvable
        assert bare.approvable and "scripts/x.sh" in [f.path for f in bare.files]
        return
    assert not bare.approvable, f"{command!r} approvable by its command line alone"
    (hook,) = bare.uncovered
    assert hook.pointer == "/hooks/stop/1" and hook.command == command
    assert hook.reasons and hook.count >= 1
    assert "cannot be approved by its command line alone" in hook.describe()
    covered = _digest(root, cover)
    assert covered.approvable, covered.uncovered
    assert "scripts/x.sh" in [f.path for f in covered.files]
    (root / "scripts" / "x.sh").write_text("#!/bin/sh\necho edited\n")
    assert _digest(root, cover).digest != covered.digest  # the edit is seen


@pytest.mark.parametrize(
    "command",
    [
        "scripts/x.sh",
        "./scripts/x.sh --flag",
        '"$CURSOR_PROJECT_DIR"/scripts/x.sh',
        "${CLAUDE_PROJECT_DIR}/scripts/x.sh",
        "sh scripts/x.sh | cat",
        "python3 --script=scripts/x.sh",
        "sh < scripts/x.sh",
        "/usr/bin/env sh scripts/x.sh",
        "sh <<EOF\n./scripts/x.sh\nEOF",
        "echo ok",
    ],
)
def test_a_command_that_names_what_it_runs_stays_approvable(tmp_path: Path, command: str) -> None:
    got = _digest(_repo_with_scripts(tmp_path, command))
    assert got.approvable and shell_syntax.parse(command).uncertain == ()


def test_a_file_added_later_in_an_uncertain_reach_closes_it_again(tmp_path: Path) -> None:
    """A covered `cd scripts && ./x.sh`, then an `x.sh` planted outside the covered path:
    not approvable again (the check runs each time the digest is taken)."""
    root = _repo_with_scripts(tmp_path, "cd scripts && ./x.sh")
    assert _digest(root, "scripts/**").approvable
    (root / "lib").mkdir()
    (root / "lib" / "x.sh").write_text("echo planted\n")
    got = _digest(root, "scripts/**")
    assert not got.approvable and got.uncovered[0].files == ("lib/x.sh",)
    assert "lib/**" in got.uncovered[0].suggested


def test_the_hook_directory_covers_what_it_holds(tmp_path: Path) -> None:
    root = _repo_with_scripts(tmp_path, "cd .cursor/hooks && ./y.sh")
    (root / ".cursor" / "hooks").mkdir()
    (root / ".cursor" / "hooks" / "y.sh").write_text("echo y\n")
    assert _digest(root).approvable


def _pinned(root: Path, approved: set[str], paths: tuple[str, ...] = ()) -> object:
    forget_loaded_sources()
    loaded = load_sources(
        SourceSettings(workspace=root, project_digests=frozenset(approved),
                       project_digest_paths=paths)
    )  # fmt: skip
    (project,) = [s for s in loaded.sources if s.name == "project"]
    return project


@pytest.mark.parametrize("form", ["cd", "default-expansion", "pwd"])
def test_an_approved_digest_of_an_uncertain_hook_does_not_load_it(
    tmp_path: Path, form: str
) -> None:
    """The issue's three forms through the real loader: the digest `hooks digest` would
    have printed is approved, the script edited, and the hooks still do not load; covered
    by a digest path, they load, and the edit unapproves them."""
    command, cover = FORMS[form]
    root = _repo_with_scripts(tmp_path, command)
    project = _pinned(root, {_digest(root).digest})
    assert project.status is SourceStatus.SKIPPED  # type: ignore[attr-defined]
    (note,) = project.diagnostics  # type: ignore[attr-defined]
    assert note.code == "project-digest-uncovered" and "/hooks/stop/1" in note.message
    assert cover is not None
    approved = _digest(root, cover).digest
    assert _pinned(root, {approved}, (cover,)).status is SourceStatus.LOADED  # type: ignore[attr-defined]
    (root / "scripts" / "x.sh").write_text("#!/bin/sh\necho edited\n")
    assert _pinned(root, {approved}, (cover,)).status is SourceStatus.SKIPPED  # type: ignore[attr-defined]


def test_validate_and_hooks_digest_name_the_hook_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo_with_scripts(tmp_path, "cd scripts && ./x.sh")
    assert main(["hooks", "digest", "--config", "/dev/null", str(root)]) == 1
    out, err = capsys.readouterr()
    assert out == ""  # no digest to approve
    (line, last) = err.splitlines()
    assert "/hooks/stop/1" in line and "`cd scripts`" in line and "scripts/x.sh" in line
    assert "scripts/**" in line and "not approvable" in last
    assert main(["hooks", "digest", "--config", "/dev/null", "--files", str(root)]) == 1
    out, _ = capsys.readouterr()
    assert "not approvable: these hooks need a covered path" in out
    assert main(["hooks", "digest", "--config", "/dev/null", "--path", "scripts/**",
                 str(root)]) == 0  # fmt: skip
    digest = capsys.readouterr().out.strip()
    config = tmp_path / "pinned.toml"
    config.write_text(f'[sources]\nproject_digests = ["{digest}"]\n')
    assert main(["validate", "--format", "json", "--no-image-check", "--config", str(config),
                 str(root)]) == 1  # fmt: skip
    (file,) = json.loads(capsys.readouterr().out)["files"]
    (uncovered,) = [d for d in file["diagnostics"] if d["code"] == "project-digest-uncovered"]
    assert uncovered["pointer"] == "/hooks/stop/1/command" and "cd" in uncovered["message"]
    assert "project-approved" not in [d["code"] for d in file["diagnostics"]]
    config.write_text(
        f'[sources]\nproject_digests = ["{digest}"]\nproject_digest_paths = ["scripts/**"]\n'
    )
    assert main(["validate", "--format", "json", "--no-image-check", "--config", str(config),
                 str(root)]) == 0  # fmt: skip
    (file,) = json.loads(capsys.readouterr().out)["files"]
    assert "project-approved" in [d["code"] for d in file["diagnostics"]]


def test_a_repository_too_big_to_check_is_not_approvable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _repo_with_scripts(tmp_path, '"$PWD"/scripts/x.sh')
    monkeypatch.setattr(pinning, "MAX_CHECKED_FILES", 2)
    (hook,) = _digest(root, "**").uncovered
    assert "too many to check" in hook.files[0]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(command=st.text(alphabet=st.sampled_from(list("ab./ $~{}()'\"`;&|<>*?-=:\\\n")),
                       max_size=40))  # fmt: skip
def test_any_command_gives_a_digest_and_an_uncertain_one_may_not_pass_unseen(
    tmp_path_factory: pytest.TempPathFactory, command: str
) -> None:
    """Never raises; a command that may run any file (reach `**`) is not approvable while
    README.md, named by nothing, is not covered."""
    root = _repo_with_scripts(tmp_path_factory.mktemp("fuzz"), command)
    got = _digest(root)
    anywhere = any("**" in u.reach for u in shell_syntax.parse(command).uncertain)
    if anywhere:
        assert not got.approvable
    assert got.approvable is (got.uncovered == ())


def test_validate_marks_every_hook_of_an_unapprovable_file_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo_with_scripts(tmp_path, '"$PWD"/scripts/x.sh')
    config = tmp_path / "pinned.toml"
    config.write_text(f'[sources]\nproject_digests = ["{_digest(root).digest}"]\n')
    main(["validate", "--format", "json", "--no-image-check", "--config", str(config), str(root)])
    (file,) = json.loads(capsys.readouterr().out)["files"]
    verdicts = {h["verdict"] for h in file["hooks"]}
    assert verdicts == {"skipped"}, file["hooks"]
