"""Variables an operator passes from the daemon's environment to hooks, per source.

A hook on the agent's VM sees the VM's environment; in the sandbox it sees only the
protocol's variables (spec section 5). Some guards change behaviour on a variable the
operator sets (`CI`, a deployment's name), so the operator may name, per source, the
variables of the daemon's own environment its hooks get (settings `[hook_env]`):

- an entry is an exact name (`CI`) or a prefix ending in `*` (`DEPLOY_*`);
- a name that looks like a credential (`*_TOKEN`, `*_KEY`, `PASSWORD`, ... as the audit's
  redaction reads names) passes only when listed by its exact name: a prefix never
  passes one (it is refused, and the record says so by name);
- the protocol's own variables, `HOME`, `PATH` and the daemon's `CLOUDRUNNER_*` settings
  are never passed: listing one is a settings error;
- each hook record names what was passed, refused and missing, never a value.

The values are read from the daemon's environment when the worker starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from cloudrunner.audit.redaction import is_secret_name
from cloudrunner.protocol.profiles import SourceKind

#: set by the protocol (spec section 5) or the sandbox: never taken from the daemon
RESERVED = frozenset(
    {
        "CURSOR_PROJECT_DIR", "CLAUDE_PROJECT_DIR", "CURSOR_VERSION", "CURSOR_USER_EMAIL",
        "CURSOR_TRANSCRIPT_PATH", "CURSOR_CODE_REMOTE", "HOME", "PATH",
    }
)  # fmt: skip
#: the daemon's own settings and credentials (CLOUDRUNNER_GIT_TOKEN, ...)
RESERVED_PREFIX = "CLOUDRUNNER_"
_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")
#: most entries a source may list, and the most variables one prefix may pass
MAX_ENTRIES = 256
MAX_PASSED = 256


def check_entry(entry: str) -> str:
    """A settings entry as given, or ValueError saying what is wrong and what to write."""
    if entry == "*":
        raise ValueError("'*' alone would pass the daemon's whole environment; name a prefix")
    if not isinstance(entry, str) or not _ENTRY.fullmatch(entry):
        raise ValueError(
            f"{entry!r} is not a variable name or a prefix ending in '*' (letters, digits "
            "and '_', not starting with a digit; for example CI or DEPLOY_*)"
        )
    name = entry.rstrip("*")
    if name.upper().startswith(RESERVED_PREFIX):
        raise ValueError(
            f"{entry!r} names the daemon's own settings ({RESERVED_PREFIX}*), which hooks never get"
        )
    if not entry.endswith("*") and entry in RESERVED:
        raise ValueError(f"{entry} is set by the protocol or the sandbox, never by the daemon")
    return entry


@dataclass(frozen=True)
class Passed:
    """What one source's hooks get: the values, and for the record the names only."""

    values: Mapping[str, str] = field(default_factory=dict)
    #: name -> why it was not passed (looks like a credential, reserved)
    refused: Mapping[str, str] = field(default_factory=dict)
    #: exact names the daemon's environment does not have
    missing: tuple[str, ...] = ()

    def record(self) -> dict[str, object]:
        """For the hook record: names, never values."""
        return {
            "passed": sorted(self.values),
            # a list of pairs: a name as a key would have its reason redacted as a secret
            "refused": [{"name": k, "reason": v} for k, v in sorted(self.refused.items())],
            "missing": list(self.missing),
        }


_RESERVED_WHY = "set by the protocol, the sandbox or the daemon; never passed"


def _reserved(name: str) -> bool:
    return name in RESERVED or name.upper().startswith(RESERVED_PREFIX)


def resolve(entries: Sequence[str], environ: Mapping[str, str]) -> Passed:
    """The variables `entries` pass from `environ` (see the module text)."""
    exact = [e for e in entries if not e.endswith("*")]
    prefixes = [e[:-1] for e in entries if e.endswith("*")]
    values: dict[str, str] = {}
    refused: dict[str, str] = {}
    for name in exact:
        if _reserved(name):
            refused[name] = _RESERVED_WHY  # the settings refuse it; here too
        elif name in environ:
            values[name] = environ[name]  # listed explicitly: passed even if secret-looking
    for name in sorted(environ):
        if name in values or not any(name.startswith(p) for p in prefixes):
            continue
        if _reserved(name):
            refused[name] = _RESERVED_WHY
        elif is_secret_name(name):
            refused[name] = (
                "looks like a credential; a prefix never passes one: list it by its exact "
                "name to pass it"
            )
        elif len(values) >= MAX_PASSED:
            refused[name] = f"over {MAX_PASSED} variables; name fewer"
        else:
            values[name] = environ[name]
    missing = tuple(name for name in exact if name not in environ and name not in refused)
    return Passed(values, refused, missing)


def resolve_all(
    entries_of: Callable[[SourceKind], Sequence[str]], environ: Mapping[str, str]
) -> dict[SourceKind, Passed]:
    """Each source kind with entries, resolved against `environ` (the daemon's)."""
    out: dict[SourceKind, Passed] = {}
    for kind in SourceKind:
        entries = entries_of(kind)
        if entries:
            out[kind] = resolve(entries, environ)
    return out
