"""Where the secret for a clone comes from (`Credentials`: a variable's name, a file, an
ssh key; never the secret itself), and the secret as a value that never shows itself."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cloudrunner.workspace.checkout import WorkspaceError

DEFAULT_USERNAME = "x-access-token"


class Secret:
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

    def load_token(self) -> Secret | None:
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
            return Secret(value)
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
            return Secret(value)
        return None
