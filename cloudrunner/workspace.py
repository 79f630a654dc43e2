"""The repository hooks run against: cloned at a ref, or adopted in place.

`clone()` fetches a repository (https, http, ssh, `file://` or a local path) at a branch,
tag or commit, shallow by default, and `adopt()` takes an existing checkout as it is. Both
return a `Workspace` that records the resolved commit and whether project hooks are trusted.

Credentials reach git only through the environment of the git process: an askpass helper in a
private temporary directory reads the secret from that environment, so the secret is never on
a command line, in a file, in the clone's `.git/config`, in a log event or in an error message.
Git's credential helpers are switched off for these commands so a `credential.helper=store` in
the operator's own git config cannot persist the secret either.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal
from urllib.parse import SplitResult, urlsplit, urlunsplit

import git
import git.exc

from cloudrunner.errors import CloudrunnerError
from cloudrunner.memo import BoundedMemo
from cloudrunner.repo_files import RepoFileRefused, read_inside, real_path

SourceKind = Literal["https", "http", "ssh", "file", "local"]
RefKind = Literal["default", "branch", "tag", "ref", "commit", "adopted"]
#: How the history was obtained; documented in README.md.
Strategy = Literal["shallow", "full", "shallow-commit", "full-fallback", "adopted"]

DEFAULT_USERNAME = "x-access-token"
DEFAULT_GIT_TIMEOUT = 600.0
_HEX = re.compile(r"[0-9a-fA-F]{4,40}")
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?[^@/:\s]+:(?!//)")
_PASSWORD_ENV = "CLOUDRUNNER_GIT_PASSWORD"
_USERNAME_ENV = "CLOUDRUNNER_GIT_USERNAME"
# The helper prints what git asks for; the secret stays in the git process's environment.
_ASKPASS_SCRIPT = f"""#!/bin/sh
case "$1" in
  [Uu]sername*) printf '%s\\n' "${_USERNAME_ENV}" ;;
  *) printf '%s\\n' "${_PASSWORD_ENV}" ;;
esac
"""


class WorkspaceError(CloudrunnerError):
    """The workspace could not be cloned or adopted."""


class RepositoryNotFound(WorkspaceError):
    pass


class RefNotFound(WorkspaceError):
    pass


class AuthenticationRequired(WorkspaceError):
    pass


class _Secret:
    """A secret value whose repr and str never show it (so a stray log line cannot leak it)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


@dataclass(frozen=True)
class Credentials:
    """Where the secret for a clone comes from: never the secret itself.

    `token_env` names an environment variable holding a token or password; `token_file` is a
    file whose content (surrounding whitespace stripped) is the token. `username` goes with it
    for http(s) (`x-access-token` suits GitHub; GitLab takes `oauth2`; any name for Gitea).
    `ssh_key_file` is a private key for ssh URLs. With `require_token` False an unset or
    empty `token_env` means "no token" (for a default variable name the operator may not
    use); otherwise it is an error, since the operator asked for that variable.
    """

    token_env: str | None = None
    token_file: Path | None = None
    username: str = DEFAULT_USERNAME
    ssh_key_file: Path | None = None
    require_token: bool = True

    def describe(self) -> str:
        """Where the credentials came from, for messages (names only, never values)."""
        parts = []
        if self.token_env and (self.require_token or os.environ.get(self.token_env, "").strip()):
            parts.append(f"environment variable {self.token_env}")
        if self.token_file:
            parts.append(f"credential file {self.token_file}")
        if self.ssh_key_file:
            parts.append(f"ssh key {self.ssh_key_file}")
        return " and ".join(parts) or "no credentials"

    def load_token(self) -> _Secret | None:
        if self.token_env and self.token_file:
            raise WorkspaceError(
                f"credentials name both environment variable {self.token_env} and credential "
                f"file {self.token_file}; give only one"
            )
        if self.token_env:
            value = os.environ.get(self.token_env, "").strip()
            if not value and not self.require_token:
                return None
            if not value:
                raise WorkspaceError(
                    f"credential environment variable {self.token_env} is not set or empty; "
                    "export it with the token, or drop the setting"
                )
            return _Secret(value)
        if self.token_file:
            try:
                value = self.token_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise WorkspaceError(
                    f"cannot read credential file {self.token_file}: {exc.strerror}; "
                    "check the path and its permissions"
                ) from None
            if not value:
                raise WorkspaceError(
                    f"credential file {self.token_file} is empty; write the token into it"
                )
            return _Secret(value)
        return None


@dataclass(frozen=True)
class Workspace:
    """A checkout hooks run against.

    `root` is the absolute workspace root (project hooks' working directory); `commit` the
    full id of the checked-out commit (None in an adopted repository with no commit yet);
    `origin` the repository URL with any user info removed (None when adopted without a
    remote). `trust_project_hooks` is False when the operator
    configured the workspace as untrusted: then no project hooks load (spec section 2).
    """

    root: Path
    commit: str | None
    origin: str | None
    ref: str | None
    ref_kind: RefKind
    strategy: Strategy
    trust_project_hooks: bool = True
    shallow: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def cursor_dir(self) -> Path:
        return self.root / ".cursor"

    @property
    def project_hooks_file(self) -> Path:
        return self.cursor_dir / "hooks.json"

    @property
    def environment_file(self) -> Path:
        return self.cursor_dir / "environment.json"


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class _Source:
    kind: SourceKind
    url: str  # what git is given: never carries a password
    username: str | None
    password: _Secret | None


def classify_source(source: str) -> SourceKind:
    """Which kind of repository location `source` is (https, http, ssh, file or local)."""
    return _parse_source(source).kind


def redact_url(source: str) -> str:
    """`source` without user info (a password or token in a URL), for messages and records."""
    text = source.strip()
    if "://" not in text:
        return text
    try:
        return _strip_userinfo(urlsplit(text))
    except ValueError:
        return "<unparseable repository URL>"


def _parse_source(source: str) -> _Source:
    text = source.strip()
    if not text:
        raise WorkspaceError("the repository location is empty; give a URL or a path")
    if "://" in text:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme in ("http", "https"):
            host = parts.hostname or ""
            if not host:
                raise WorkspaceError(f"repository URL {_strip_userinfo(parts)} has no host")
            password = _Secret(parts.password) if parts.password else None
            kind: SourceKind = "https" if scheme == "https" else "http"
            return _Source(kind, _strip_userinfo(parts), parts.username, password)
        if scheme in ("ssh", "git+ssh", "ssh+git"):
            if parts.password:
                raise WorkspaceError(
                    "ssh repository URLs cannot carry a password; use an ssh key "
                    "(credentials ssh_key_file) instead"
                )
            return _Source("ssh", text, None, None)
        if scheme == "file":
            return _Source("file", text, None, None)
        raise WorkspaceError(
            f"repository URL scheme {scheme!r} is not supported; use https, http, ssh, "
            "file:// or a local path"
        )
    if text.startswith("ext::") or text.startswith("-"):
        raise WorkspaceError(f"repository location {text!r} is not a URL or a path")
    if Path(text).exists():
        return _Source("local", str(Path(text).resolve()), None, None)
    if _SCP_LIKE.match(text) and not text.startswith(("/", ".")):
        return _Source("ssh", text, None, None)
    raise RepositoryNotFound(
        f"repository {text} does not exist: it is neither a path on this machine nor a "
        "URL; check the --repo value"
    )


def _strip_userinfo(parts: SplitResult) -> str:
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


# --------------------------------------------------------------------------- git environment


@dataclass
class _GitAccess:
    """The environment git runs with, and the values that must never appear in output."""

    env: dict[str, str]
    secrets: list[str]

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text


def _config_env(base: Mapping[str, str], pairs: list[tuple[str, str]]) -> dict[str, str]:
    """GIT_CONFIG_COUNT entries appended after any the worker's environment already has."""
    try:
        start = int(base.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        start = 0
    env: dict[str, str] = {}
    for offset, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{start + offset}"] = key
        env[f"GIT_CONFIG_VALUE_{start + offset}"] = value
    env["GIT_CONFIG_COUNT"] = str(start + len(pairs))
    return env


@contextlib.contextmanager
def _git_access(source: _Source, credentials: Credentials | None) -> Iterator[_GitAccess]:
    creds = credentials or Credentials()
    token = creds.load_token() or source.password
    username = source.username or creds.username
    env: dict[str, str] = {
        # Never wait for a human: a missing credential is an error, not a prompt.
        "GIT_TERMINAL_PROMPT": "0",
        "GCM_INTERACTIVE": "never",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
    }
    env.update(
        _config_env(
            os.environ,
            [
                # An empty value resets the helper list: nothing may store or supply secrets.
                ("credential.helper", ""),
                ("core.askPass", ""),
            ],
        )
    )
    secrets: list[str] = []
    if source.kind == "ssh":
        base = os.environ.get("GIT_SSH_COMMAND")
        if not base and not os.environ.get("GIT_SSH"):
            base = "ssh -o BatchMode=yes"
        if creds.ssh_key_file is not None:
            if not creds.ssh_key_file.is_file():
                raise WorkspaceError(
                    f"ssh key file {creds.ssh_key_file} does not exist; check the path"
                )
            base = (
                f"{base or 'ssh'} -i {shlex.quote(str(creds.ssh_key_file))} -o IdentitiesOnly=yes"
            )
        if base:
            env["GIT_SSH_COMMAND"] = base
    tmp: str | None = None
    try:
        if token is not None and source.kind in ("https", "http"):
            secrets.append(token.reveal())
            tmp = tempfile.mkdtemp(prefix="cloudrunner-askpass-")
            helper = Path(tmp) / "askpass"
            helper.write_text(_ASKPASS_SCRIPT, encoding="utf-8")
            helper.chmod(stat.S_IRWXU)
            env["GIT_ASKPASS"] = str(helper)
            env[_USERNAME_ENV] = username
            env[_PASSWORD_ENV] = token.reveal()
        yield _GitAccess(env, secrets)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- clone


def clone(
    source: str,
    dest: Path,
    *,
    ref: str | None = None,
    shallow: bool = True,
    credentials: Credentials | None = None,
    trust_project_hooks: bool = True,
    timeout: float = DEFAULT_GIT_TIMEOUT,
) -> Workspace:
    """Clone `source` into `dest` (absent or empty) at `ref` and return the Workspace.

    `ref` is a branch, a tag, a full ref name (`refs/pull/1/head`) or a commit id (full or
    abbreviated); None means the remote's default branch. Shallow (depth 1) by default; a
    commit a shallow fetch cannot reach is fetched by id, or failing that with full history.
    Raises RepositoryNotFound, RefNotFound, AuthenticationRequired or WorkspaceError, each a
    one-line message without any secret; `dest` is removed again when the clone fails.
    """
    parsed = _parse_source(source)
    dest = dest.absolute()
    created = not dest.exists()
    if not created and (not dest.is_dir() or any(dest.iterdir())):
        raise WorkspaceError(f"clone destination {dest} exists and is not an empty directory")
    with _git_access(parsed, credentials) as access:
        try:
            workspace = _clone_into(parsed, dest, ref, shallow, access, timeout, credentials)
            workspace = replace(workspace, trust_project_hooks=trust_project_hooks)
        except BaseException:
            if created:
                shutil.rmtree(dest, ignore_errors=True)
            else:
                for child in dest.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
            raise
    return workspace


def _clone_into(
    source: _Source,
    dest: Path,
    ref: str | None,
    shallow: bool,
    access: _GitAccess,
    timeout: float,
    credentials: Credentials | None,
) -> Workspace:
    dest.mkdir(parents=True, exist_ok=True)
    runner = _Git(dest, access, timeout, source, credentials)
    runner.run("init", "-q")
    runner.run("remote", "add", "origin", source.url)
    refs, head_target = runner.ls_remote()
    depth = ["--depth=1"] if shallow else []
    notes: list[str] = []

    if ref is None:
        if head_target and head_target in refs:
            branch = head_target.removeprefix("refs/heads/")
            runner.fetch(*depth, "--no-tags", f"+{head_target}:refs/remotes/origin/{branch}")
            runner.run("checkout", "-q", "-B", branch, "--track", f"origin/{branch}")
            ref_kind: RefKind = "default"
        elif "HEAD" in refs:
            runner.fetch(*depth, "--no-tags", "HEAD")
            runner.run("checkout", "-q", "--detach", "FETCH_HEAD")
            ref_kind = "default"
        elif not refs:
            # a repository without any commit yet: nothing to fetch, its branch is unborn
            # (as after `git clone` of it); adopted and run like any other, commit null
            return Workspace(
                root=dest,
                commit=None,
                origin=source.url,
                ref=None,
                ref_kind="default",
                strategy="full",
                notes=("the repository has no commit yet: commit is null",),
            )
        else:
            raise RefNotFound(
                f"repository {source.url} has no default branch (it may be empty); "
                "give a ref with --ref"
            )
        strategy: Strategy = "shallow" if shallow else "full"
    elif f"refs/heads/{ref}" in refs:
        runner.fetch(*depth, "--no-tags", f"+refs/heads/{ref}:refs/remotes/origin/{ref}")
        runner.run("checkout", "-q", "-B", ref, "--track", f"origin/{ref}")
        ref_kind, strategy = "branch", ("shallow" if shallow else "full")
    elif f"refs/tags/{ref}" in refs:
        runner.fetch(*depth, "--no-tags", f"+refs/tags/{ref}:refs/tags/{ref}")
        runner.run("checkout", "-q", "--detach", f"refs/tags/{ref}^{{commit}}")
        ref_kind, strategy = "tag", ("shallow" if shallow else "full")
    elif ref.startswith("refs/") and ref in refs:
        runner.fetch(*depth, "--no-tags", ref)
        runner.run("checkout", "-q", "--detach", "FETCH_HEAD")
        ref_kind, strategy = "ref", ("shallow" if shallow else "full")
    elif _HEX.fullmatch(ref):
        strategy = _fetch_commit(runner, ref, refs, shallow, notes)
        ref_kind = "commit"
    else:
        raise RefNotFound(
            f"ref {ref!r} does not exist in {source.url}: no branch, tag or commit has that "
            "name; check --ref"
        )
    commit = runner.run("rev-parse", "--verify", "HEAD^{commit}").strip()
    is_shallow = runner.run("rev-parse", "--is-shallow-repository").strip() == "true"
    return Workspace(
        root=Path(real_path(dest)),
        commit=commit,
        origin=source.url,
        ref=ref,
        ref_kind=ref_kind,
        strategy=strategy,
        shallow=is_shallow,
        notes=tuple(notes),
    )


def _fetch_commit(
    runner: _Git, ref: str, refs: dict[str, str], shallow: bool, notes: list[str]
) -> Strategy:
    """Fetch commit `ref`: by id at depth 1 when allowed, else the full history."""
    wanted = ref.lower()
    if shallow and len(wanted) == 40:
        try:
            runner.fetch("--depth=1", "--no-tags", wanted)
        except WorkspaceError as exc:
            if isinstance(exc, AuthenticationRequired):
                raise
            notes.append(
                "the server refused to send a commit by id at depth 1 "
                f"({exc.message}); fetched the full history instead"
            )
        else:
            if runner.has_commit(wanted):
                runner.run("checkout", "-q", "--detach", wanted)
                return "shallow-commit"
    runner.fetch("--tags", "+refs/heads/*:refs/remotes/origin/*")
    if not runner.has_commit(wanted):
        raise RefNotFound(
            f"ref {ref!r} does not exist in {runner.source.url}: no branch, tag or commit "
            "reachable from its branches and tags has that name; check --ref"
        )
    runner.run("checkout", "-q", "--detach", f"{wanted}^{{commit}}")
    if shallow and len(wanted) == 40:
        return "full-fallback"
    if shallow:
        notes.append("an abbreviated commit id needs the full history; fetched it")
        return "full-fallback"
    return "full"


class _Git:
    """Runs git in one repository with the access environment, translating failures."""

    def __init__(
        self,
        cwd: Path,
        access: _GitAccess,
        timeout: float,
        source: _Source,
        credentials: Credentials | None,
    ) -> None:
        self.git = git.Git(str(cwd))
        self.access = access
        self.timeout = timeout
        self.source = source
        self.credentials = credentials

    def run(self, *args: str) -> str:
        try:
            out = self.git.execute(
                ["git", *args],
                env=self.access.env,
                kill_after_timeout=self.timeout,
                with_extended_output=False,
                strip_newline_in_stdout=False,
            )
        except git.exc.GitCommandError as exc:
            raise self._translate(args, exc) from None
        except git.exc.GitCommandNotFound:
            raise WorkspaceError("git is not installed or not on PATH; install git") from None
        assert isinstance(out, str)
        return out

    def fetch(self, *args: str) -> None:
        self.run("fetch", "-q", "origin", *args)

    def has_commit(self, rev: str) -> bool:
        try:
            self.git.execute(
                ["git", "rev-parse", "-q", "--verify", f"{rev}^{{commit}}"],
                env=self.access.env,
            )
        except git.exc.GitCommandError:
            return False
        return True

    def ls_remote(self) -> tuple[dict[str, str], str | None]:
        """All refs of origin (name -> id) and the branch origin's HEAD points at."""
        refs: dict[str, str] = {}
        head: str | None = None
        for line in self.run("ls-remote", "--symref", "origin").splitlines():
            if line.startswith("ref: ") and line.endswith("\tHEAD"):
                head = line[5:].split("\t", 1)[0]
                continue
            sha, _, name = line.partition("\t")
            if name and not name.endswith("^{}"):
                refs[name] = sha
        return refs, head

    def _translate(self, args: tuple[str, ...], exc: git.exc.GitCommandError) -> WorkspaceError:
        stderr = exc.stderr if isinstance(exc.stderr, str) else str(exc.stderr or "")
        said = self.access.redact(_git_said(stderr))
        low = stderr.lower()
        url = self.source.url
        if stderr.lstrip().lower().startswith("timeout:") or "did not complete in" in low:
            return WorkspaceError(f"git {args[0]} of {url} took longer than {self.timeout:g}s")
        if any(m in low for m in _AUTH_MARKERS):
            given = self.credentials.describe() if self.credentials else "no credentials"
            if given == "no credentials" and self.source.password is not None:
                given = "the URL's user info"
            if given != "no credentials":
                return AuthenticationRequired(
                    f"{url} rejected the credentials from {given} ({said}); check the "
                    "token or key and its access to the repository"
                )
            return AuthenticationRequired(
                f"{url} needs credentials and none were given ({said}); set a token "
                "environment variable or credential file (or an ssh key) for the clone"
            )
        if any(m in low for m in _NOT_FOUND_MARKERS) or _REPO_NOT_FOUND.search(low):
            return RepositoryNotFound(
                f"repository {url} does not exist or is not a git repository ({said}); "
                "check the --repo value"
            )
        if any(m in low for m in _UNREACHABLE_MARKERS):
            return WorkspaceError(f"cannot reach {url} ({said}); check the host and network")
        return WorkspaceError(f"git {args[0]} failed for {url} ({said})")


_AUTH_MARKERS = (
    "authentication failed",
    "could not read username",
    "could not read password",
    "terminal prompts disabled",
    "access denied",
    "invalid username or password",
    "permission denied (publickey",
    "host key verification failed",
    "the requested url returned error: 401",
    "the requested url returned error: 403",
)
_NOT_FOUND_MARKERS = (
    "repository not found",
    "does not appear to be a git repository",
    "not a git repository",
    "the requested url returned error: 404",
    "no such file or directory",
)
# git over http: "fatal: repository 'https://host/x.git/' not found"
_REPO_NOT_FOUND = re.compile(r"repository '[^']*' not found")
_UNREACHABLE_MARKERS = (
    "could not resolve host",
    "connection refused",
    "failed to connect",
    "connection timed out",
    "network is unreachable",
)


def _git_said(stderr: str) -> str:
    """The most telling line of git's stderr, for a one-line message."""
    text = stderr.strip()
    # gitpython wraps git's output as: stderr: '<output>'
    if text.startswith("stderr: '") and text.endswith("'"):
        text = text[len("stderr: '") : -1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for prefix in ("fatal:", "error:", "remote:"):
        for line in lines:
            if line.startswith(prefix):
                return line[:300]
    return (lines[-1] if lines else "no output")[:300]


# --------------------------------------------------------------------------- adopt


def adopt(path: Path, *, trust_project_hooks: bool = True) -> Workspace:
    """Take an existing checkout at `path` as the workspace, in place, changing nothing.

    `path` may be a subdirectory of a repository (a monorepo package): it stays the root,
    the commit is the enclosing repository's HEAD. Only `git rev-parse` runs in the
    checkout: commands such as `git status` honour settings in the checkout's own
    `.git/config` (core.fsmonitor) that could run programs on the worker host.

    The root is `path` resolved once (symlinks followed, see `resolve_root`); a relative
    path, a path that is not a directory and a git directory (`.git`, anything inside
    one, a bare repository) are refused.
    """
    root = resolve_root(path)
    # The checkout may belong to another user (a cloud agent's); git refuses such a
    # repository unless it is named safe, and rev-parse runs nothing from its config.
    env = {"GIT_TERMINAL_PROMPT": "0"}
    env.update(_config_env(os.environ, [("safe.directory", "*")]))
    runner = git.Git(str(root))
    notes: tuple[str, ...] = ()
    try:
        inside_git_dir, shallow = str(
            runner.execute(
                ["git", "rev-parse", "--is-inside-git-dir", "--is-shallow-repository"], env=env
            )
        ).split()
        if inside_git_dir == "true":
            raise WorkspaceError(
                f"workspace {root} is a git directory (a bare repository or the inside of "
                "a .git directory), not a checkout; give the checkout's root"
            )
        commit: str | None = _adopted_commit(runner, env)
    except git.exc.GitCommandError as exc:
        stderr = exc.stderr if isinstance(exc.stderr, str) else ""
        if "not a git repository" in stderr.lower():
            raise WorkspaceError(
                f"workspace {root} is not a git checkout; give a checkout to --workspace "
                "or clone one with --repo"
            ) from None
        raise WorkspaceError(
            f"workspace {root} has no commit checked out ({_git_said(stderr)}); "
            "commit or check out a branch first"
        ) from None
    except git.exc.GitCommandNotFound:
        raise WorkspaceError("git is not installed or not on PATH; install git") from None
    assert isinstance(shallow, str)
    if commit is None:
        notes = ("the repository has no commit yet (its branch is unborn): commit is null",)
    origin: str | None
    try:
        url = runner.execute(["git", "config", "--get", "remote.origin.url"], env=env)
        origin = redact_url(str(url).strip()) if str(url).strip() else None
    except git.exc.GitCommandError:
        origin = None
    workspace = Workspace(
        root=root,
        commit=commit,
        origin=origin,
        ref=None,
        ref_kind="adopted",
        strategy="adopted",
        trust_project_hooks=trust_project_hooks,
        shallow=shallow.strip() == "true",
        notes=notes,
    )
    return workspace


def resolve_root(path: Path) -> Path:
    """The real path of the workspace directory `path`, resolved once: the one path the
    worker uses for the mount, the hooks' working directory and CURSOR_PROJECT_DIR.

    Refuses (WorkspaceError) a relative path (relative to what: the worker's own working
    directory is no answer), a path that does not name a directory, and a git directory
    or anything inside one (hooks would run, and write, in the repository's internals).
    """
    text = str(path)
    if "\0" in text:
        raise WorkspaceError(f"workspace {text!r} contains a NUL byte; give a real directory")
    if not path.is_absolute():
        raise WorkspaceError(
            f"workspace {text!r} is a relative path; give an absolute path (the worker does "
            "not guess what it is relative to)"
        )
    try:
        root = Path(real_path(path))
        is_dir = root.is_dir()
    except (OSError, ValueError) as exc:
        raise WorkspaceError(f"workspace {text!r} is not a usable path ({exc})") from None
    if not is_dir:
        raise WorkspaceError(
            f"workspace {path} does not exist or is not a directory; give the directory of "
            "a checkout"
        )
    if ".git" in root.parts:
        shown = str(path) if str(path) == str(root) else f"{path} (really {root})"
        raise WorkspaceError(
            f"workspace {shown} is a .git directory or inside one, not a checkout; give "
            "the checkout's root"
        )
    return root


def check_unchanged(root: Path) -> None:
    """Refuse (WorkspaceError) a resolved workspace root that is no longer a directory at
    its own real path: a long-lived worker resolves a workspace once, and a checkout
    swapped for a symlink since would otherwise send hooks (and the gate's probe, and the
    project hooks file) to wherever the link leads now."""
    try:
        real = real_path(root)
        is_dir = os.path.isdir(real)
    except (OSError, ValueError) as exc:
        raise WorkspaceError(f"workspace {root} is not usable any more ({exc})") from None
    if real != str(root):
        raise WorkspaceError(
            f"workspace {root} changed into a symlink (to {real}) since it was resolved; "
            "it is refused: adopt the checkout again under its real path"
        )
    if not is_dir:
        raise WorkspaceError(
            f"workspace {root} does not exist any more or is not a directory; restore the checkout"
        )


def _adopted_commit(runner: git.Git, env: Mapping[str, str]) -> str | None:
    """HEAD's commit, or None when HEAD names a branch that has no commit yet (a repository
    made by `git init` and never committed to). Raises GitCommandError otherwise."""
    try:
        commit = runner.execute(["git", "rev-parse", "--verify", "HEAD^{commit}"], env=dict(env))
    except git.exc.GitCommandError:
        if _unborn(runner, env):
            return None
        raise
    assert isinstance(commit, str)
    return commit.strip()


def _unborn(runner: git.Git, env: Mapping[str, str]) -> bool:
    try:
        branch = runner.execute(["git", "symbolic-ref", "-q", "HEAD"], env=dict(env))
    except git.exc.GitCommandError:
        return False
    try:
        runner.execute(["git", "show-ref", "--verify", "-q", str(branch).strip()], env=dict(env))
    except git.exc.GitCommandError:
        return True
    return False


# --------------------------------------------------------------------------- HEAD, cheaply

_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def head_commit(ws: Workspace) -> str | None:
    """The commit checked out in `ws` now, read from the git directory's files (no process:
    a daemon asks on every event). Anything unusual (a `.git` file, a symbolic ref to
    nowhere, a file that leads outside the repository) answers the commit known from the
    checkout or adoption; a branch with no commit yet answers None until its first commit."""
    found = _git_dir_of(ws.root)
    if found is None:
        return ws.commit
    directory, git_dir = found
    key = (str(git_dir), ws.commit)
    remembered = _heads.get(key)
    if remembered is not None and _head_files(git_dir, remembered[2]) == remembered[0]:
        return remembered[1]
    commit, ref = _read_head(git_dir, directory, ws.commit)
    ids = _head_files(git_dir, ref)
    # Remembered only when the files are not so recent that a rewrite in place could keep
    # its time stamps (see sources.RACY_NS), and when a second read after taking their
    # identity says the same: a change between the first read and the identity shows there.
    if ids[0] is not None and _settled_files(ids):
        again = _read_head(git_dir, directory, ws.commit)
        if again == (commit, ref) and _head_files(git_dir, ref) == ids:
            _heads.put(key, (ids, commit, ref))
    return commit


def _git_dir_of(root: Path) -> tuple[Path, Path] | None:
    """The repository directory holding `root` and its `.git` directory, or None when the
    nearest `.git` is not a directory (a worktree's or submodule's `.git` file) or there is
    none (or it cannot be looked at). One stat per directory, the checkout's own first: on the
    daemon's every event that is the only one."""
    for directory in (root, *root.parents):
        try:
            mode = os.stat(f"{directory}/.git").st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue  # none here: the parent's
        except OSError:
            return None
        return (directory, directory / ".git") if stat.S_ISDIR(mode) else None
    return None


def _read_head(git_dir: Path, directory: Path, known: str | None) -> tuple[str | None, str | None]:
    """HEAD's commit read from the files (`known` when they say nothing usable), and the
    ref HEAD names (None for a detached HEAD)."""
    # Read only what resolves inside the repository: a ref symlinked (or named with "..")
    # to a file elsewhere must not put that file's content in the records as a commit.
    head = _git_file(git_dir / "HEAD", directory)
    if head is None:
        return known, None
    if _SHA.fullmatch(head):
        return head, None
    if not head.startswith("ref: "):
        return known, None
    ref = head[len("ref: ") :]
    loose = git_dir / ref
    if loose.is_file():
        value = _git_file(loose, directory)
        return (value if value is not None and _SHA.fullmatch(value) else known), ref
    packed = _git_file(git_dir / "packed-refs", directory, _MAX_PACKED_REFS)
    for line in (packed or "").splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and _SHA.fullmatch(sha):
            return sha, ref
    return known, ref


_FileId = tuple[int, int, int, int, int] | None
#: (git dir, known commit) -> (identity of HEAD, its ref and packed-refs; commit; ref):
#: a daemon asks on every event, and the files change only with a commit or checkout
_HeadFiles = tuple[_FileId, _FileId, _FileId]
_heads: BoundedMemo[tuple[str, str | None], tuple[_HeadFiles, str | None, str | None]] = (
    BoundedMemo()
)
#: a file changed this recently (ns) is read again on every event
_RACY_NS = 2_000_000_000


def _file_id(path: str) -> _FileId:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _head_files(git_dir: Path, ref: str | None) -> _HeadFiles:
    """The identity (lstat) of HEAD and, when it names `ref`, of the loose ref and
    packed-refs: git replaces these files (a lock file renamed over them) when they change."""
    base = str(git_dir)
    head = _file_id(base + "/HEAD")
    if ref is None:
        return head, None, None
    return head, _file_id(f"{base}/{ref}"), _file_id(base + "/packed-refs")


def _settled_files(ids: _HeadFiles) -> bool:
    now = time.time_ns()
    return all(found is None or now - max(found[3], found[4]) > _RACY_NS for found in ids)


#: a packed-refs file larger than this is not read (the known commit is answered)
_MAX_PACKED_REFS = 64 * 1024 * 1024


def _git_file(path: Path, repository: Path, max_bytes: int = 4096) -> str | None:
    """The stripped text of a small file of the git directory, or None when it is absent,
    leads outside `repository`, is too large or is not UTF-8."""
    try:
        return read_inside(path, repository, max_bytes=max_bytes).decode("utf-8").strip()
    except (OSError, RepoFileRefused, UnicodeDecodeError):
        return None
