"""Running git for a clone: the environment it runs with and `GitRunner`, which translates its
failures into one-line errors.

Credentials reach git only through the environment of the git process: an askpass helper in a
private temporary directory reads the secret from that environment, so the secret is never on
a command line, in a file, in the clone's `.git/config`, in a log event or in an error message.
Git's credential helpers are switched off for these commands so a `credential.helper=store` in
the operator's own git config cannot persist the secret either."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from cloudrunner.workspace.checkout import (
    AuthenticationRequired,
    RepositoryNotFound,
    WorkspaceError,
)
from cloudrunner.workspace.git_credentials import Credentials
from cloudrunner.workspace.locations import GitSource

if TYPE_CHECKING:  # imported where git runs (`gitpython`): see its docstring
    import git
    import git.exc

NO_GIT = "git is not installed or not on PATH; install git"


def gitpython() -> ModuleType:
    """GitPython, imported when git is about to run, not when the package is: importing it
    looks for the git program and fails without one, and commands that never run git
    (`cloudrunner --version`, a worker image's build stage) must work where it is absent."""
    try:
        import git
        import git.exc
    except ImportError:  # GitPython's check that git runs failed
        raise WorkspaceError(NO_GIT) from None
    return git


_PASSWORD_ENV = "CLOUDRUNNER_GIT_PASSWORD"
_USERNAME_ENV = "CLOUDRUNNER_GIT_USERNAME"
# The helper prints what git asks for; the secret stays in the git process's environment.
_ASKPASS_SCRIPT = f"""#!/bin/sh
case "$1" in
  [Uu]sername*) printf '%s\\n' "${_USERNAME_ENV}" ;;
  *) printf '%s\\n' "${_PASSWORD_ENV}" ;;
esac
"""


@dataclass
class GitAccess:
    """The environment git runs with, and the values that must never appear in output."""

    env: dict[str, str]
    secrets: list[str]

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text


def config_env(base: Mapping[str, str], pairs: list[tuple[str, str]]) -> dict[str, str]:
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
def git_access(source: GitSource, credentials: Credentials | None) -> Iterator[GitAccess]:
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
        config_env(
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
        yield GitAccess(env, secrets)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


class GitRunner:
    """Runs git in one repository with the access environment, translating failures."""

    def __init__(
        self,
        cwd: Path,
        access: GitAccess,
        timeout: float,
        source: GitSource,
        credentials: Credentials | None,
    ) -> None:
        module = gitpython()
        self.git = module.Git(str(cwd))
        self._errors: Any = module.exc
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
        except self._errors.GitCommandError as exc:
            raise self._translate(args, exc) from None
        except self._errors.GitCommandNotFound:
            raise WorkspaceError(NO_GIT) from None
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
        except self._errors.GitCommandError:
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
        said = self.access.redact(git_said(stderr))
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


def git_said(stderr: str) -> str:
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
