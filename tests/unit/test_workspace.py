"""Cloning and adopting real repositories: local bare repos, a local ssh transport and a
real HTTP git server (git http-backend behind http.server with Basic auth) on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog.testing

from cloudrunner import workspace as ws
from cloudrunner.workspace import (
    AuthenticationRequired,
    Credentials,
    RefNotFound,
    RepositoryNotFound,
    WorkspaceError,
)
from tests.support.git_http import GitServer, serve_git
from tests.support.git_repos import bare_repo, git, init_repo

SECRET = "s3cr3t-tok3n-5f0a9c"


@dataclass
class Upstream:
    bare: Path
    commits: list[str]  # main's history, oldest first
    tag_commit: str
    feature_tip: str

    @property
    def url(self) -> str:
        return self.bare.as_uri()


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    """A bare repository: main with 3 commits, annotated tag v1 on the 2nd, branch feature."""
    src = tmp_path / "src"
    src.mkdir()
    init_repo(src)
    (src / ".cursor").mkdir()
    commits = []
    for n in range(3):
        (src / "file.txt").write_text(f"version {n}\n")
        (src / ".cursor" / "hooks.json").write_text('{"version": 1, "hooks": {}}\n')
        git(src, "add", "-A")
        git(src, "commit", "-q", "-m", f"commit {n}")
        commits.append(git(src, "rev-parse", "HEAD"))
        if n == 1:
            git(src, "tag", "-a", "v1", "-m", "release 1")
    git(src, "checkout", "-q", "-b", "feature", commits[0])
    (src / "feature.txt").write_text("feature\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "feature work")
    feature_tip = git(src, "rev-parse", "HEAD")
    git(src, "checkout", "-q", "main")
    bare = tmp_path / "upstream.git"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(bare))
    return Upstream(bare, commits, commits[1], feature_tip)


def _count_commits(root: Path) -> int:
    return int(git(root, "rev-list", "--count", "HEAD"))


# ------------------------------------------------------------------ sources


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("https://github.com/org/repo.git", "https"),
        ("http://127.0.0.1:8080/repo.git", "http"),
        ("ssh://git@example.com/org/repo.git", "ssh"),
        ("git@github.com:org/repo.git", "ssh"),
        ("file:///srv/git/repo.git", "file"),
    ],
)
def test_classify_source(source: str, kind: str) -> None:
    assert ws.classify_source(source) == kind


def test_an_existing_path_is_a_local_source(upstream: Upstream) -> None:
    assert ws.classify_source(str(upstream.bare)) == "local"


@pytest.mark.parametrize("source", ["git://example.com/r.git", "ext::sh -c id", "ftp://h/r"])
def test_unsupported_sources_are_refused(source: str) -> None:
    with pytest.raises(WorkspaceError, match="not"):
        ws.classify_source(source)


def test_redact_url_drops_user_info() -> None:
    assert ws.redact_url(f"https://me:{SECRET}@example.com:8443/r.git?x=1") == (
        "https://example.com:8443/r.git?x=1"
    )
    assert ws.redact_url("git@github.com:org/repo.git") == "git@github.com:org/repo.git"


# ------------------------------------------------------------------ clone: refs and depth


def test_clone_default_branch_is_shallow(upstream: Upstream, tmp_path: Path) -> None:
    got = ws.clone(upstream.url, tmp_path / "w")
    assert got.commit == upstream.commits[-1]
    assert (got.ref_kind, got.strategy, got.shallow) == ("default", "shallow", True)
    assert _count_commits(got.root) == 1
    assert git(got.root, "symbolic-ref", "--short", "HEAD") == "main"
    assert git(got.root, "rev-parse", "--abbrev-ref", "@{upstream}") == "origin/main"
    assert got.trust_project_hooks is True
    assert got.project_hooks_file == got.root / ".cursor" / "hooks.json"
    assert got.project_hooks_file.is_file()
    assert got.origin == upstream.url


def test_clone_branch_from_a_plain_path(upstream: Upstream, tmp_path: Path) -> None:
    got = ws.clone(str(upstream.bare), tmp_path / "w", ref="feature")
    assert got.commit == upstream.feature_tip
    assert got.ref_kind == "branch"
    # A plain path is fetched like file://, so it is shallow too.
    assert got.shallow
    assert (got.root / "feature.txt").is_file()


def test_clone_annotated_tag_resolves_to_its_commit(upstream: Upstream, tmp_path: Path) -> None:
    got = ws.clone(upstream.url, tmp_path / "w", ref="v1")
    assert got.commit == upstream.tag_commit
    assert got.ref_kind == "tag"
    assert (got.root / "file.txt").read_text() == "version 1\n"


def test_clone_full_ref_name(upstream: Upstream, tmp_path: Path) -> None:
    got = ws.clone(upstream.url, tmp_path / "w", ref="refs/heads/feature")
    assert (got.commit, got.ref_kind) == (upstream.feature_tip, "ref")


def test_clone_old_commit_is_fetched_by_id_at_depth_one(upstream: Upstream, tmp_path: Path) -> None:
    got = ws.clone(upstream.url, tmp_path / "w", ref=upstream.commits[0])
    assert got.commit == upstream.commits[0]
    assert (got.ref_kind, got.strategy, got.shallow) == ("commit", "shallow-commit", True)
    assert _count_commits(got.root) == 1


def test_commit_the_server_will_not_send_by_id_falls_back_to_full_history(
    upstream: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Protocol v0 upload-pack refuses unadvertised objects, as many servers do.
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "protocol.version")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "0")
    got = ws.clone(upstream.url, tmp_path / "w", ref=upstream.commits[0])
    assert got.commit == upstream.commits[0]
    assert got.strategy == "full-fallback"
    assert not got.shallow
    assert any("refused" in note for note in got.notes)


def test_abbreviated_commit_needs_full_history(upstream: Upstream, tmp_path: Path) -> None:
    got = ws.clone(upstream.url, tmp_path / "w", ref=upstream.commits[1][:9])
    assert got.commit == upstream.commits[1]
    assert got.strategy == "full-fallback"


def test_full_clone_on_request(upstream: Upstream, tmp_path: Path) -> None:
    got = ws.clone(upstream.url, tmp_path / "w", ref="main", shallow=False)
    assert (got.strategy, got.shallow) == ("full", False)
    assert _count_commits(got.root) == 3


def test_untrusted_workspace_is_recorded(upstream: Upstream, tmp_path: Path) -> None:
    got = ws.clone(upstream.url, tmp_path / "w", trust_project_hooks=False)
    assert got.trust_project_hooks is False


# ------------------------------------------------------------------ clone: faults


def test_missing_repository_url(tmp_path: Path) -> None:
    with pytest.raises(RepositoryNotFound) as info:
        ws.clone((tmp_path / "nope.git").as_uri(), tmp_path / "w")
    assert "does not exist" in info.value.message
    assert "\n" not in info.value.message
    assert not (tmp_path / "w").exists()


def test_missing_repository_path(tmp_path: Path) -> None:
    with pytest.raises(RepositoryNotFound, match="neither a path on this machine nor a URL"):
        ws.clone(str(tmp_path / "nope"), tmp_path / "w")


def test_a_directory_that_is_not_a_repository(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(RepositoryNotFound, match="not a git repository"):
        ws.clone(str(tmp_path / "plain"), tmp_path / "w")
    assert not (tmp_path / "w").exists()


def test_missing_ref(upstream: Upstream, tmp_path: Path) -> None:
    with pytest.raises(RefNotFound) as info:
        ws.clone(upstream.url, tmp_path / "w", ref="no-such-branch")
    assert "'no-such-branch'" in info.value.message and "--ref" in info.value.message
    assert not (tmp_path / "w").exists()


def test_missing_commit(upstream: Upstream, tmp_path: Path) -> None:
    with pytest.raises(RefNotFound):
        ws.clone(upstream.url, tmp_path / "w", ref="0123456789abcdef0123456789abcdef01234567")
    assert not (tmp_path / "w").exists()


def test_existing_destination_is_refused_and_kept(upstream: Upstream, tmp_path: Path) -> None:
    dest = tmp_path / "w"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep me")
    with pytest.raises(WorkspaceError, match="not an empty directory"):
        ws.clone(upstream.url, dest)
    assert (dest / "mine.txt").read_text() == "keep me"


def test_failed_clone_into_an_empty_directory_leaves_it_empty(tmp_path: Path) -> None:
    dest = tmp_path / "w"
    dest.mkdir()
    with pytest.raises(RepositoryNotFound):
        ws.clone((tmp_path / "nope.git").as_uri(), dest)
    assert dest.is_dir() and not any(dest.iterdir())


def test_missing_credential_variable_is_named(upstream: Upstream, tmp_path: Path) -> None:
    os.environ.pop("CLOUDRUNNER_TEST_UNSET_TOKEN", None)
    with pytest.raises(WorkspaceError, match="CLOUDRUNNER_TEST_UNSET_TOKEN is not set"):
        ws.clone(
            upstream.url,
            tmp_path / "w",
            credentials=Credentials(token_env="CLOUDRUNNER_TEST_UNSET_TOKEN"),
        )


def test_optional_credential_variable_may_be_unset(upstream: Upstream, tmp_path: Path) -> None:
    os.environ.pop("CLOUDRUNNER_TEST_UNSET_TOKEN", None)
    creds = Credentials(token_env="CLOUDRUNNER_TEST_UNSET_TOKEN", require_token=False)
    got = ws.clone(upstream.url, tmp_path / "w", credentials=creds)
    assert got.commit == upstream.commits[-1]


def test_optional_unset_variable_still_reports_missing_credentials(
    git_server: GitServer, tmp_path: Path
) -> None:
    os.environ.pop("CLOUDRUNNER_TEST_UNSET_TOKEN", None)
    creds = Credentials(token_env="CLOUDRUNNER_TEST_UNSET_TOKEN", require_token=False)
    with pytest.raises(AuthenticationRequired, match="none were given"):
        ws.clone(git_server.url("upstream.git"), tmp_path / "w", credentials=creds)


def test_empty_credential_file_is_named(upstream: Upstream, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("\n")
    with pytest.raises(WorkspaceError, match=r"credential file .*token is empty"):
        ws.clone(upstream.url, tmp_path / "w", credentials=Credentials(token_file=token_file))


# ------------------------------------------------------------------ ssh transport

# A stand-in for ssh that runs the remote command locally: git speaks its real ssh
# transport to it, so the URL handling and GIT_SSH_COMMAND composition are exercised.
_SSH_SHIM = """
import os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["SHIM_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
while args and args[0].startswith("-"):
    option = args.pop(0)
    if option in ("-o", "-i", "-p", "-l"):
        args.pop(0)
host, command = args[0], " ".join(args[1:])
sys.exit(subprocess.call(["sh", "-c", command]))
"""


def test_clone_over_ssh_with_a_key_file(
    upstream: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shim = tmp_path / "ssh-shim.py"
    shim.write_text(_SSH_SHIM)
    log = tmp_path / "ssh.log"
    key = tmp_path / "id_test"
    key.write_text("not a real key; the shim does not read it\n")
    monkeypatch.setenv("SHIM_LOG", str(log))
    monkeypatch.setenv("GIT_SSH_COMMAND", f"{sys.executable} {shim}")
    monkeypatch.setenv("GIT_SSH_VARIANT", "ssh")
    got = ws.clone(
        f"ssh://git@localhost{upstream.bare}",
        tmp_path / "w",
        ref="v1",
        credentials=Credentials(ssh_key_file=key),
    )
    assert got.commit == upstream.tag_commit
    calls = log.read_text()
    assert f"-i {key} -o IdentitiesOnly=yes" in calls
    assert "git-upload-pack" in calls


# ------------------------------------------------------------------ HTTP with Basic auth


@pytest.fixture
def git_server(upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitServer]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    with serve_git(upstream.bare.parent, "robot", SECRET) as server:
        yield server


def _files_containing(root: Path, needle: str) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and needle.encode() in path.read_bytes():
            found.append(path)
    return found


@pytest.fixture
def isolated_git_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME whose git config would store every credential it sees (helper=store)."""
    home = tmp_path / "home"
    home.mkdir()
    config = home / ".gitconfig"
    config.write_text("[credential]\n\thelper = store\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    return home


def test_http_clone_with_a_token_from_the_environment_leaves_no_trace(
    git_server: GitServer,
    upstream: Upstream,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    isolated_git_home: Path,
) -> None:
    monkeypatch.setenv("TEST_GIT_TOKEN", SECRET)
    with structlog.testing.capture_logs() as logs:
        got = ws.clone(
            git_server.url("upstream.git"),
            tmp_path / "w",
            ref="v1",
            credentials=Credentials(token_env="TEST_GIT_TOKEN", username="robot"),
        )
    assert got.commit == upstream.tag_commit
    assert git_server.server.seen_auth[-1] == git_server.server.expected_auth
    assert _files_containing(got.root / ".git", SECRET) == []
    assert SECRET not in (got.root / ".git" / "config").read_text()
    assert SECRET not in repr(got)
    # Nothing logged may carry it either (the workspace leaves logging to the audit).
    assert SECRET not in repr(logs)
    # credential.helper=store in the operator's config was switched off for the clone.
    assert not (isolated_git_home / ".git-credentials").exists()
    assert _files_containing(isolated_git_home, SECRET) == []


def test_http_clone_with_a_credential_file(
    git_server: GitServer, upstream: Upstream, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(SECRET + "\n")
    got = ws.clone(
        git_server.url("upstream.git"),
        tmp_path / "w",
        credentials=Credentials(token_file=token_file, username="robot"),
    )
    assert got.commit == upstream.commits[-1]
    assert _files_containing(got.root / ".git", SECRET) == []


def test_http_clone_with_user_info_in_the_url_keeps_it_out_of_the_config(
    git_server: GitServer, upstream: Upstream, tmp_path: Path
) -> None:
    got = ws.clone(git_server.url("upstream.git", f"robot:{SECRET}@"), tmp_path / "w")
    assert got.commit == upstream.commits[-1]
    assert got.origin == git_server.url("upstream.git")
    assert git(got.root, "config", "--get", "remote.origin.url") == got.origin
    assert _files_containing(got.root / ".git", SECRET) == []


def test_http_clone_without_the_credentials_it_needs(git_server: GitServer, tmp_path: Path) -> None:
    with pytest.raises(AuthenticationRequired) as info:
        ws.clone(git_server.url("upstream.git"), tmp_path / "w")
    message = info.value.message
    assert "needs credentials and none were given" in message
    assert "\n" not in message
    assert not (tmp_path / "w").exists()


def test_http_clone_with_rejected_credentials_never_shows_them(
    git_server: GitServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "wr0ng-" + SECRET
    monkeypatch.setenv("TEST_GIT_TOKEN", wrong)
    with pytest.raises(AuthenticationRequired) as info:
        ws.clone(
            git_server.url("upstream.git", "robot@"),
            tmp_path / "w",
            credentials=Credentials(token_env="TEST_GIT_TOKEN"),
        )
    message = str(info.value)
    assert "rejected the credentials from environment variable TEST_GIT_TOKEN" in message
    assert wrong not in message and SECRET not in message
    assert "\n" not in message
    # The traceback chain is cut, so nothing else carries git's raw output either.
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_http_repository_that_does_not_exist(
    git_server: GitServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_GIT_TOKEN", SECRET)
    with pytest.raises(RepositoryNotFound) as info:
        ws.clone(
            git_server.url("missing.git"),
            tmp_path / "w",
            credentials=Credentials(token_env="TEST_GIT_TOKEN", username="robot"),
        )
    assert SECRET not in info.value.message


def test_http_ref_that_does_not_exist(
    git_server: GitServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_GIT_TOKEN", SECRET)
    with pytest.raises(RefNotFound) as info:
        ws.clone(
            git_server.url("upstream.git"),
            tmp_path / "w",
            ref="v9",
            credentials=Credentials(token_env="TEST_GIT_TOKEN", username="robot"),
        )
    assert SECRET not in info.value.message


# ------------------------------------------------------------------ adopt


def test_adopt_a_checkout_in_place(upstream: Upstream, tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(upstream.bare), str(checkout))
    (checkout / "uncommitted.txt").write_text("work in progress\n")
    got = ws.adopt(checkout, trust_project_hooks=False)
    assert got.root == checkout
    assert got.commit == upstream.commits[-1]
    assert (got.ref_kind, got.strategy) == ("adopted", "adopted")
    assert got.trust_project_hooks is False
    assert got.origin == str(upstream.bare)
    assert (checkout / "uncommitted.txt").is_file()


def test_adopt_a_subdirectory_keeps_it_as_the_root(upstream: Upstream, tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(upstream.bare), str(checkout))
    got = ws.adopt(checkout / ".cursor")
    assert got.root == checkout / ".cursor"
    assert got.commit == upstream.commits[-1]


def test_adopt_redacts_a_password_in_the_origin(upstream: Upstream, tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(upstream.bare), str(checkout))
    git(checkout, "remote", "set-url", "origin", f"https://robot:{SECRET}@example.com/r.git")
    got = ws.adopt(checkout)
    assert got.origin == "https://example.com/r.git"


def test_adopt_a_checkout_owned_by_another_user(upstream: Upstream, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to hand the checkout to another user")
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(upstream.bare), str(checkout))
    subprocess.run(["chown", "-R", "10002:10002", str(checkout)], check=True)
    got = ws.adopt(checkout)
    assert got.commit == upstream.commits[-1]


def test_adopt_refuses_a_directory_that_is_not_a_checkout(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(WorkspaceError, match="is not a git checkout"):
        ws.adopt(tmp_path / "plain")


def test_adopt_takes_a_repository_without_commits_with_commit_none(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    init_repo(empty)
    (empty / "staged.txt").write_text("x\n")
    git(empty, "add", "staged.txt")
    adopted = ws.adopt(empty)
    assert adopted.commit is None
    assert adopted.ref_kind == "adopted"
    assert any("no commit yet" in note for note in adopted.notes)
    # still no commit: HEAD names an unborn branch
    assert ws.head_commit(adopted) is None
    # the first commit is seen without adopting again
    git(empty, "-c", "user.name=t", "-c", "user.email=t@e.invalid", "commit", "-q", "-m", "1")
    first = git(empty, "rev-parse", "HEAD").strip()
    assert ws.head_commit(adopted) == first


def test_a_repository_without_commits_is_cloned_with_commit_none(tmp_path: Path) -> None:
    origin = tmp_path / "empty.git"
    bare_repo(origin)
    cloned = ws.clone(origin.as_uri(), tmp_path / "clone")
    assert cloned.commit is None
    assert any("no commit yet" in note for note in cloned.notes)
    # the clone is a repository; adopting it again (a later process) agrees
    assert ws.adopt(tmp_path / "clone").commit is None
    # a ref that names nothing in an empty repository is still refused
    with pytest.raises(RefNotFound):
        ws.clone(origin.as_uri(), tmp_path / "clone2", ref="main")


def test_adopt_refuses_a_head_that_names_a_missing_commit(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    init_repo(broken, branch=None)
    (broken / ".git" / "HEAD").write_text("0123456789012345678901234567890123456789\n")
    with pytest.raises(WorkspaceError, match=r"has no commit checked out|not a git checkout"):
        ws.adopt(broken)


def test_adopt_refuses_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="does not exist"):
        ws.adopt(tmp_path / "absent")
