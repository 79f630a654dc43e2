"""Workspace resolution: one real path, and relative, git-internal and non-directory
workspaces refused with one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudrunner import workspace as ws
from tests.support.git_repos import committed_repo, git


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    (root / "f").write_text("x\n")
    committed_repo(root, "one")
    return root


def test_a_symlinked_workspace_resolves_to_its_real_path(checkout: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(checkout)
    adopted = ws.adopt(link)
    assert adopted.root == checkout.resolve()
    assert adopted.commit == git(checkout, "rev-parse", "HEAD")


def test_a_chain_of_symlinks_and_dot_dots_resolves_once(checkout: Path, tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(checkout.parent)
    assert ws.adopt(tmp_path / "a" / "checkout" / "." / ".." / "checkout").root == checkout


def test_a_relative_workspace_is_refused(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(checkout.parent)
    with pytest.raises(ws.WorkspaceError, match="relative path; give an absolute path"):
        ws.adopt(Path("checkout"))
    with pytest.raises(ws.WorkspaceError, match="relative"):
        ws.adopt(Path("."))


@pytest.mark.parametrize("inner", [".git", ".git/refs", ".git/objects/info"])
def test_a_git_directory_or_anything_inside_one_is_refused(checkout: Path, inner: str) -> None:
    with pytest.raises(ws.WorkspaceError, match=r"\.git directory or inside one"):
        ws.adopt(checkout / inner)


def test_a_symlink_into_a_git_directory_is_refused_naming_both(
    checkout: Path, tmp_path: Path
) -> None:
    (tmp_path / "innocent").symlink_to(checkout / ".git")
    with pytest.raises(ws.WorkspaceError, match="really") as caught:
        ws.adopt(tmp_path / "innocent")
    assert str(checkout / ".git") in caught.value.message


def test_a_bare_repository_is_refused(checkout: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(checkout), str(bare))
    with pytest.raises(ws.WorkspaceError, match="is a git directory"):
        ws.adopt(bare)


def test_a_file_and_a_missing_path_are_refused(checkout: Path) -> None:
    with pytest.raises(ws.WorkspaceError, match="not a directory"):
        ws.adopt(checkout / "f")
    with pytest.raises(ws.WorkspaceError, match="does not exist"):
        ws.adopt(checkout / "missing")


def test_a_nul_byte_is_refused_not_raised_raw(checkout: Path) -> None:
    with pytest.raises(ws.WorkspaceError, match="NUL"):
        ws.adopt(Path(f"{checkout}\0x"))


def test_a_path_with_colons_and_spaces_is_adopted_as_is(tmp_path: Path) -> None:
    root = tmp_path / "a:b, c=d ü"
    root.mkdir()
    (root / "f").write_text("x")
    committed_repo(root, "one")
    assert ws.adopt(root).root == root


def test_a_clone_reached_through_a_symlink_records_the_real_root(
    checkout: Path, tmp_path: Path
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real)
    cloned = ws.clone(str(checkout), tmp_path / "via" / "dest")
    assert cloned.root == real / "dest"


def test_a_resolved_root_swapped_for_a_symlink_is_refused(checkout: Path, tmp_path: Path) -> None:
    adopted = ws.adopt(checkout)
    ws.check_unchanged(adopted.root)  # as adopted: fine
    other = tmp_path / "someone-elses"
    other.mkdir()
    checkout.rename(tmp_path / "moved-away")
    checkout.symlink_to(other)
    with pytest.raises(ws.WorkspaceError, match="changed into a symlink") as caught:
        ws.check_unchanged(adopted.root)
    assert str(other) in caught.value.message
    checkout.unlink()
    with pytest.raises(ws.WorkspaceError, match="does not exist any more"):
        ws.check_unchanged(adopted.root)


_NAME = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), min_size=1, max_size=10
).filter(lambda name: name not in (".", ".."))


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_NAME, min_size=1, max_size=3), st.booleans())
def test_any_directory_name_resolves_to_itself_and_relative_never_does(
    tmp_path: Path, names: list[str], through_link: bool
) -> None:
    real = tmp_path.joinpath("real", *names)
    real.mkdir(parents=True, exist_ok=True)
    given_path = real
    if through_link:
        link = tmp_path / "links" / str(abs(hash(tuple(names))))
        link.parent.mkdir(exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(real)
        given_path = link
    if ".git" in names:
        with pytest.raises(ws.WorkspaceError, match=r"\.git"):
            ws.resolve_root(given_path)
        return
    assert ws.resolve_root(given_path) == real
    with pytest.raises(ws.WorkspaceError, match="relative"):
        ws.resolve_root(Path(*names))


def test_head_commit_follows_the_checkout(checkout: Path) -> None:
    adopted = ws.adopt(checkout)
    (checkout / "g").write_text("y\n")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "two")
    assert ws.head_commit(adopted) == git(checkout, "rev-parse", "HEAD") != adopted.commit
    git(checkout, "pack-refs", "--all")
    assert ws.head_commit(adopted) == git(checkout, "rev-parse", "HEAD")


@pytest.mark.parametrize("how", ["symlinked ref", "dot-dot ref"])
def test_head_commit_never_reads_a_ref_outside_the_repository(
    checkout: Path, tmp_path: Path, how: str
) -> None:
    """A 40-hex secret in a host file must not become the recorded commit."""
    adopted = ws.adopt(checkout)
    secret = tmp_path / "api-key"
    secret.write_text("f" * 40 + "\n")
    if how == "symlinked ref":
        ref = checkout / ".git" / "refs" / "heads" / "main"
        ref.unlink()
        ref.symlink_to(secret)
    else:
        (checkout / ".git" / "HEAD").write_text(f"ref: ../../{secret.name}\n")
    assert ws.head_commit(adopted) == adopted.commit
