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
    full id of the checked-out commit; `origin` the repository URL with any user info removed
    (None when adopted without a remote). `trust_project_hooks` is False when the operator
    configured the workspace as untrusted: then no project hooks load (spec section 2).
    """

    root: Path
    commit: str
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
        root=dest,
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
    """
    root = path.absolute()
    if not root.is_dir():
        raise WorkspaceError(
            f"workspace {root} does not exist or is not a directory; check --workspace"
        )
    # The checkout may belong to another user (a cloud agent's); git refuses such a
    # repository unless it is named safe, and rev-parse runs nothing from its config.
    env = {"GIT_TERMINAL_PROMPT": "0"}
    env.update(_config_env(os.environ, [("safe.directory", "*")]))
    runner = git.Git(str(root))
    try:
        commit = runner.execute(["git", "rev-parse", "--verify", "HEAD^{commit}"], env=env)
        shallow = runner.execute(["git", "rev-parse", "--is-shallow-repository"], env=env)
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
    assert isinstance(commit, str) and isinstance(shallow, str)
    origin: str | None
    try:
        url = runner.execute(["git", "config", "--get", "remote.origin.url"], env=env)
        origin = redact_url(str(url).strip()) if str(url).strip() else None
    except git.exc.GitCommandError:
        origin = None
    workspace = Workspace(
        root=root,
        commit=commit.strip(),
        origin=origin,
        ref=None,
        ref_kind="adopted",
        strategy="adopted",
        trust_project_hooks=trust_project_hooks,
        shallow=shallow.strip() == "true",
    )
    return workspace


# --------------------------------------------------------------------------- HEAD, cheaply

_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


#: HEAD and refs changed this recently (ns) are read again on every call: within one timer
#: tick a rewrite can leave the same times (and a recycled inode), see `head_commit`
RACY_NS = 2_000_000_000
_FileId = tuple[int, int, int, int] | None
#: git dir -> (HEAD's identity, the loose ref's path and identity, packed-refs' identity,
#: the commit or None for "unusual, answer the known commit")
_heads: dict[str, tuple[_FileId, str | None, _FileId, _FileId, str | None]] = {}


def _file_id(path: str) -> _FileId:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _git_dir(root: str) -> str | None:
    """The `.git` directory of `root` or its nearest parent; None for a `.git` file (a
    linked worktree, a submodule) or no repository."""
    directory = root
    while True:
        candidate = os.path.join(directory, ".git")
        try:
            mode = os.stat(candidate).st_mode
        except OSError:
            mode = None
        if mode is not None:
            return candidate if stat.S_ISDIR(mode) else None
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _resolve_head(git_dir: str) -> tuple[str | None, str | None]:
    """(the commit HEAD names or None when unusual, the loose ref's path when symbolic)."""
    head = _read_text(f"{git_dir}/HEAD").strip()
    if _SHA.fullmatch(head):
        return head, None
    if not head.startswith("ref: "):
        return None, None
    ref = head[len("ref: ") :]
    loose = os.path.join(git_dir, ref)
    if os.path.isfile(loose):
        value = _read_text(loose).strip()
        return (value if _SHA.fullmatch(value) else None), loose
    packed = f"{git_dir}/packed-refs"
    if os.path.isfile(packed):
        for line in _read_text(packed).splitlines():
            sha, _, name = line.partition(" ")
            if name == ref and _SHA.fullmatch(sha):
                return sha, loose
    return None, loose


def head_commit(ws: Workspace) -> str:
    """The commit checked out in `ws` now, read from the git directory's files (no process:
    a daemon asks on every event). Anything unusual (a `.git` file, a symbolic ref to
    nowhere) answers the commit known from the checkout or adoption.

    The answer is remembered with the identity (inode, size, times) of HEAD, the loose ref
    it names and packed-refs: git replaces each by a rename when it changes them, so while
    all three keep their identity (3 stats) nothing is read. Files changed within RACY_NS
    are read every time."""
    git_dir = _git_dir(str(ws.root))
    if git_dir is None:
        return ws.commit
    packed_path = f"{git_dir}/packed-refs"
    try:
        head_id = _file_id(f"{git_dir}/HEAD")
        known = _heads.get(git_dir)
        if known is not None and known[0] == head_id:
            _, loose, loose_id, packed_id, commit = known
            if loose is None or (
                _file_id(loose) == loose_id
                and (loose_id is not None or _file_id(packed_path) == packed_id)
            ):
                return commit or ws.commit
        commit, loose = _resolve_head(git_dir)
        ids = (head_id, _file_id(loose) if loose else None, _file_id(packed_path))
        if head_id is not None and _settled(ids) and _file_id(f"{git_dir}/HEAD") == head_id:
            if len(_heads) >= 256:
                _heads.clear()
            _heads[git_dir] = (head_id, loose, ids[1], ids[2], commit)
    except (OSError, UnicodeDecodeError):
        return ws.commit
    return commit or ws.commit


def _settled(ids: tuple[_FileId, ...]) -> bool:
    newest = max((i[3] for i in ids if i is not None), default=0)
    newest = max([newest, *(i[2] for i in ids if i is not None)])
    return time.time_ns() - newest > RACY_NS
