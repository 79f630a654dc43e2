"""Failures the sandbox caused, read from a finished hook's exit code and stderr.

A hook that fails because the sandbox differs from the agent's VM (a program missing from the
image, a script that is not executable, a workspace the hook uid cannot write, a file system
that is read-only outside the workspace, no network) should not look like the hook's own
verdict. `diagnose` finds the stderr line that shows such a cause and says what it is and
how to fix it; the outcome's reason, a failClosed block's message and the audit record carry
that text and the line.

Each rule is one regular expression over one stderr line; the first line that matches any
rule wins (earlier rules first on the same line). The table is `RULES`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cloudrunner.protocol.profiles import MANAGED_SOURCES, SourceKind

#: stderr lines longer than this are cut before matching (and in the record)
LINE_LIMIT = 500
#: only the first lines of stderr are searched: the cause of a failure is printed early
MAX_LINES = 200


class CauseKind(StrEnum):
    #: a program the command runs is not in the image (exit 127, spawn ENOENT)
    MISSING_PROGRAM = "missing_program"
    #: a script the command names does not exist where the hook looks for it
    MISSING_SCRIPT = "missing_script"
    #: a file outside the workspace that the hook opens is not in the sandbox
    MISSING_PATH = "missing_path"
    #: a script run by path lacks the executable bit (exit 126)
    NOT_EXECUTABLE = "not_executable"
    #: a script's first line ends in a carriage return (CRLF line endings)
    CRLF_SHEBANG = "crlf_shebang"
    #: a binary for another system or architecture (exit 126, exec format error)
    EXEC_FORMAT = "exec_format"
    #: EACCES on a path inside the workspace
    WORKSPACE_NOT_WRITABLE = "workspace_not_writable"
    #: EACCES / EROFS outside the workspace (the image's read-only root, HOME)
    READ_ONLY_OUTSIDE_WORKSPACE = "read_only_outside_workspace"
    #: a failed name lookup or an unreachable network
    NO_NETWORK = "no_network"
    #: EPERM changing the mode or owner of a workspace file another uid owns (root's)
    NOT_OWNER = "not_owner"
    #: the hook's own stdin/stdout/stderr refused when opened by path (/dev/stdin)
    STANDARD_STREAM = "standard_stream"


@dataclass(frozen=True)
class SandboxContext:
    """What the message names: the image, the hook's uid, the workspace and the network."""

    image: str = ""
    #: "10001" or "10001:10001" as the sandbox attests it
    hook_user: str = ""
    workspace: str = ""
    network: str = ""
    #: the hook's source kind, when known
    source: SourceKind | None = None

    @property
    def uid(self) -> str:
        return self.hook_user.split(":", 1)[0] if self.hook_user else "the hook uid"

    def in_workspace(self, path: str) -> bool:
        if not self.workspace or not path:
            return False
        root = self.workspace.rstrip("/")
        if not path.startswith("/"):
            # resolved from the working directory: the workspace for project hooks, the
            # hooks file's own (read-only) directory for enterprise and team hooks
            return self.source not in MANAGED_SOURCES
        return path == root or path.startswith(root + "/")


@dataclass(frozen=True)
class SandboxCause:
    kind: CauseKind
    #: the stderr line that showed it (trimmed, capped)
    line: str
    #: cause and fix in one sentence, for the outcome's reason and the block message
    message: str
    #: the missing or refused program, script or path, when the line names one
    subject: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "subject": self.subject,
            "line": self.line,
            "message": self.message,
        }


# --- messages --------------------------------------------------------------------------

_IMAGE_FIX = "add it through .cursor/environment.json or the runtime image (sandbox.image)"


def _image(ctx: SandboxContext) -> str:
    return f"image {ctx.image}" if ctx.image else "the hook runtime image"


def _missing_program(name: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    if "/" in name:
        return _path_not_found(name, ctx)
    return CauseKind.MISSING_PROGRAM, f"`{name}` is not in {_image(ctx)}: {_IMAGE_FIX}"


def _path_not_found(path: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    """dash says `X: not found` both for a missing script and for a missing #! interpreter."""
    return CauseKind.MISSING_SCRIPT, (
        f"{path} was not found: either the script is not where the hook looks (commit it; "
        "project hook paths are relative to the repository root), or the interpreter its #! "
        f"line names is not in {_image(ctx)} (start it with `#!/usr/bin/env <interpreter>`, "
        f"or {_IMAGE_FIX})"
    )


def _interpreter_of(script: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    return CauseKind.MISSING_PROGRAM, (
        f"the interpreter that the #! line of {script} names is not in {_image(ctx)}: start it "
        f"with `#!/usr/bin/env <interpreter>` so PATH finds it, or {_IMAGE_FIX}"
    )


def _interpreter(path: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    name = path.rsplit("/", 1)[-1]
    return CauseKind.MISSING_PROGRAM, (
        f"the script's #! interpreter {path} is not in {_image(ctx)}: start the script with "
        f"`#!/usr/bin/env {name}` so PATH finds it, or {_IMAGE_FIX}"
    )


def _missing_path(path: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    if ctx.in_workspace(path):
        where = f"the workspace {ctx.workspace}" if ctx.workspace else "the workspace"
        return CauseKind.MISSING_SCRIPT, (
            f"{path} does not exist in {where} as the hook sees it: commit the script, and "
            "write project hook paths relative to the repository root (or via "
            "$CURSOR_PROJECT_DIR)"
        )
    return CauseKind.MISSING_SCRIPT, (
        f"{path} does not exist in the sandbox, which has only {_image(ctx)}, the workspace "
        "and the hooks' own directory: keep scripts in the repository (or the source's hooks "
        "directory), not in a path of the machine the hooks file was written on"
    )


def _absent_outside(path: str, ctx: SandboxContext) -> tuple[CauseKind, str] | None:
    """A file the hook opens that is not in the sandbox; None inside the workspace or /tmp,
    where a missing file is the hook's own business (a state file not written yet)."""
    if ctx.in_workspace(path) or path == "/tmp" or path.startswith("/tmp/"):
        return None
    return CauseKind.MISSING_PATH, (
        f"{path} does not exist in the sandbox: a hook sees {_image(ctx)}, the workspace, /tmp "
        "and its hooks file's directory, not the agent machine's other files; keep what the "
        "hook reads in the repository"
    )


def _cd_failed(path: str, ctx: SandboxContext) -> tuple[CauseKind, str] | None:
    if ctx.in_workspace(path):
        where = f"the workspace {ctx.workspace}" if ctx.workspace else "the workspace"
        return CauseKind.MISSING_PATH, (
            f"{path} does not exist in {where} as the hook sees it: a directory the hook "
            "changes into must be committed (or made by the hook first)"
        )
    return _absent_outside(path, ctx)


def _not_executable(path: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    return CauseKind.NOT_EXECUTABLE, (
        f"{path} is not executable in the sandbox (exit 126): `chmod +x` it and commit the "
        f"mode (git update-index --chmod=+x {path}), or run it through its interpreter "
        f"(bash {path})"
    )


def _crlf(program: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    return CauseKind.CRLF_SHEBANG, (
        f"the script's first line asks for `{program}\\r`: the script has Windows (CRLF) line "
        "endings; convert it to LF (and add `* text=auto eol=lf` to .gitattributes)"
    )


def _exec_format(path: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    return CauseKind.EXEC_FORMAT, (
        f"{path} is not a Linux program for this machine (exec format error): commit a "
        "script or a Linux build, not a binary for another system or architecture"
    )


def _denied(path: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    if ctx.in_workspace(path):
        return CauseKind.WORKSPACE_NOT_WRITABLE, (
            f"the workspace is not writable by the hook uid {ctx.uid} ({path}): give that uid "
            "write access to the checkout (an ACL, or the owner's uid in sandbox.user), or "
            "keep the hook's state under /tmp"
        )
    return _read_only(path, ctx)


def _read_only(path: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    if ctx.in_workspace(path):
        return CauseKind.WORKSPACE_NOT_WRITABLE, (
            f"the workspace is mounted read-only for hooks ({path}): set "
            "sandbox.workspace_mode to rw for hooks that write the checkout"
        )
    if path.startswith(("/home/", "/root/", "/nonexistent")):
        return CauseKind.READ_ONLY_OUTSIDE_WORKSPACE, (
            f"{path} is in a home directory, which is read-only in this sandbox (only the "
            "workspace and /tmp are writable): point the tool's cache or state at /tmp (for "
            "example UV_CACHE_DIR, npm_config_cache, XDG_CACHE_HOME) or at the workspace"
        )
    return CauseKind.READ_ONLY_OUTSIDE_WORKSPACE, (
        f"{path} is outside what a hook may write (the image is read-only; only the workspace "
        "and /tmp are writable): keep the hook's files in $CURSOR_PROJECT_DIR or /tmp"
    )


def _not_owner(path: str, ctx: SandboxContext) -> tuple[CauseKind, str] | None:
    """EPERM on a mode or owner change: only a file's owner may make it. None outside the
    workspace (the image's files are root's on a VM as well)."""
    if not ctx.in_workspace(path):
        return None
    return CauseKind.NOT_OWNER, (
        f"{path} belongs to another user than the hook uid {ctx.uid}, and only a file's owner "
        "may change its mode: hooks run as the checkout's owner but never as root, so where "
        "root owns the checkout they run as an unprivileged uid; hand the checkout to the "
        "agent's non-root user (chown -R), and hooks run as that user"
    )


def _stream(path: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    return CauseKind.STANDARD_STREAM, (
        f"the hook could not open its own {path} by path: the sandbox handed it a stream its "
        f"uid {ctx.uid} may not open again (on a VM it can); this is the sandbox's fault, not "
        "the hook's: report it to the operator (cloudrunner makes a hook's pipes its own; an "
        "older agent or another image may not), or read descriptor 0 directly (`jq .` with "
        "no file, `readFileSync(0)`)"
    )


def _pnpm_pin(host: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    kind, message = _no_network(host, ctx)
    return kind, (
        "pnpm tried to download the pnpm version the repository pins (package.json "
        f"`packageManager`), which {_image(ctx)} lacks, and {message[0].lower()}{message[1:]}; "
        "or put that pnpm version in the image (.cursor/environment.json), or let pnpm use "
        "its own version (`pmOnFail: warn` in pnpm-workspace.yaml)"
    )


def _no_network(host: str, ctx: SandboxContext) -> tuple[CauseKind, str]:
    what = f"`{host}` cannot be resolved" if host else "the network cannot be reached"
    if ctx.network in ("", "none") and ctx.source in MANAGED_SOURCES:
        return CauseKind.NO_NETWORK, (
            f"no network for {ctx.source} hooks here: {what} because the sandbox's network is "
            f"none; the operator can allow one (sandbox.per_source.{ctx.source}.network)"
        )
    if ctx.network in ("", "none"):
        return CauseKind.NO_NETWORK, (
            f"no network for project hooks: {what} because the sandbox has no network; "
            "make the hook work offline, or run it as an enterprise or team hook on a network "
            "the operator allows (sandbox.per_source.<source>.network)"
        )
    return CauseKind.NO_NETWORK, (
        f"{what} on the sandbox's network {ctx.network!r}: check that network's DNS and "
        "routes (sandbox.per_source.<source>.network)"
    )


# --- the table -------------------------------------------------------------------------

#: (kind, message), or None when the line does not show a cause after all
Explain = Callable[[str, SandboxContext], tuple[CauseKind, str] | None]


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    explain: Explain


def _rule(name: str, pattern: str, explain: Explain) -> Rule:
    return Rule(name, re.compile(pattern), explain)


_Q = "['\u2018\u2019\"`]"  # quotes: ASCII, the UTF-8 typographic ones coreutils uses, backtick

#: the hook's own standard streams by path: /dev/stdin, /dev/fd/1, /proc/self/fd/2
_STREAM = r"(?P<x>/dev/(?:stdin|stdout|stderr|fd/[012])|/proc/(?:self|thread-self)/fd/[012])\b"

RULES: tuple[Rule, ...] = (
    # before the generic EACCES rules: `cat: /dev/stdin: Permission denied`, jq's "Could not
    # open file /dev/stdin: Permission denied", "EACCES: permission denied, open '/dev/stdin'",
    # "[Errno 13] Permission denied: '/dev/stdin'", "cannot create /dev/stderr: Permission ..."
    _rule("stream-denied", rf"{_STREAM}{_Q}?:? Permission denied", _stream),
    _rule("stream-eacces", rf"(?:EACCES|Permission denied)\b.*{_Q}{_STREAM}{_Q}", _stream),
    # a shebang with a carriage return: /usr/bin/env: 'bash\r': No such file or directory
    _rule("env-crlf", rf"env: {_Q}?(?P<x>[^'\u2019\s]+?)(?:\r|\\r){_Q}?: No such file", _crlf),
    _rule("shebang-crlf", r"^(?:/\S+: )?/\S+?/(?P<x>\w+)\^M: bad interpreter", _crlf),
    # dash: "sh: 1: X: not found", "/bin/sh: 1: X: not found", "sh: X: not found"
    _rule("dash-not-found", r"^(?:/bin/|/usr/bin/)?sh: (?:\d+: )?(?P<x>\S+): not found$",
          _missing_program),
    # bash: "bash: X: command not found", "script.sh: line 3: X: command not found"
    _rule("bash-not-found", r"^\S*: (?:line \d+: )?(?P<x>[^\s:]+): command not found$",
          _missing_program),
    _rule("zsh-not-found", r"^zsh:(?:\d+:)? command not found: (?P<x>\S+)$", _missing_program),
    # "env: 'X': No such file or directory", "/usr/bin/env: 'python': No such file ..."
    _rule("env-missing", rf"(?:^|/)env: {_Q}?(?P<x>[^'\u2019\s]+){_Q}?: No such file or "
          "directory", _missing_program),
    # a shebang whose interpreter is absent: "bash: ./x: /usr/bin/python: bad interpreter"
    _rule("bad-interpreter", r": (?P<x>/\S+): bad interpreter: No such file", _interpreter),
    # bash 5.2: "bash: ./x: cannot execute: required file not found" (its #! interpreter)
    _rule("bash-required-file", r"(?P<x>[^\s:]+): cannot execute: required file not found",
          _interpreter_of),
    # node: "Error: spawn npx ENOENT", "spawnSync rg ENOENT"
    _rule("node-spawn", r"\bspawn(?:Sync)? (?P<x>\S+) ENOENT", _missing_program),
    # python: FileNotFoundError: [Errno 2] No such file or directory: 'npx'  (subprocess)
    _rule("python-exec-missing",
          rf"FileNotFoundError: \[Errno 2\] No such file or directory: {_Q}(?P<x>[^/'\"]+){_Q}$",
          _missing_program),
    # a script path that is not there
    _rule("python-no-script",
          rf"can't open file {_Q}(?P<x>[^'\"]+){_Q}: \[Errno 2\] No such file", _missing_path),
    _rule("node-no-module", rf"Cannot find module {_Q}(?P<x>/[^'\"]+){_Q}", _missing_path),
    _rule("sh-cannot-open", r"^(?:/bin/)?(?:ba)?sh: (?:\d+: )?(?:cannot open |)(?P<x>\S+): "
          r"(?:No such file|No such file or directory)$", _missing_path),
    # a directory to change into: dash "sh: 1: cd: can't cd to X", bash "cd: X: No such file"
    _rule("dash-cd", r"\bcd: can't cd to (?P<x>\S+)", _cd_failed),
    _rule("bash-cd", r"\bcd: (?P<x>[^:]+): No such file or directory", _cd_failed),
    # a file outside the workspace that is not in the sandbox (a transcript, ~/.config/...)
    _rule("python-enoent", rf"\[Errno 2\] No such file or directory: {_Q}(?P<x>/[^'\"]+){_Q}",
          _absent_outside),
    _rule("node-enoent", r"ENOENT: no such file or directory, \w+ '(?P<x>/[^']+)'",
          _absent_outside),
    # exit 126
    _rule("exec-format", r"^(?:.*: )?(?P<x>\S+): cannot execute binary file: Exec format error",
          _exec_format),
    _rule("sh-denied-exec", r"^(?:/bin/|/usr/bin/)?(?:ba|da|z)?sh: (?:\d+: |line \d+: )?"
          r"(?P<x>\.{0,2}/\S+|[\w.-]+/\S+): Permission denied$", _not_executable),
    # read-only file system (EROFS), before the generic EACCES rules
    _rule("python-erofs", rf"\[Errno 30\] Read-only file system: {_Q}(?P<x>[^'\"]+){_Q}",
          _read_only),
    _rule("node-erofs", r"EROFS: read-only file system, \w+ '(?P<x>[^']+)'", _read_only),
    _rule("coreutils-erofs", rf"cannot [a-z ]+ {_Q}(?P<x>[^'\u2019\"]+){_Q}: Read-only file "
          "system", _read_only),
    _rule("sh-erofs", r"cannot create (?P<x>\S+): Read-only file system", _read_only),
    # EPERM changing a mode (or owner): chmod/chown, Python's os.chmod, Node's fs.chmod
    _rule("coreutils-eperm", rf"changing (?:permissions|ownership) of {_Q}(?P<x>[^'\u2019\"]+)"
          rf"{_Q}: Operation not permitted", _not_owner),
    _rule("python-eperm", rf"\[Errno 1\] Operation not permitted: {_Q}(?P<x>[^'\"]+){_Q}",
          _not_owner),
    _rule("node-eperm", r"EPERM: operation not permitted, (?:chmod|chown|lchown|utime) "
          r"'(?P<x>[^']+)'", _not_owner),
    # EACCES
    _rule("python-eacces", rf"\[Errno 13\] Permission denied: {_Q}(?P<x>[^'\"]+){_Q}", _denied),
    _rule("node-eacces", r"EACCES: permission denied, \w+ '(?P<x>[^']+)'", _denied),
    _rule("sh-create-denied", r"cannot create (?P<x>\S+): Permission denied", _denied),
    _rule("coreutils-denied", rf"cannot [a-z ]+ {_Q}(?P<x>[^'\u2019\"]+){_Q}: Permission denied",
          _denied),
    _rule("git-denied", r"could not (?:open|lock|create) '(?P<x>[^']+)'[^:]*: Permission denied",
          _denied),
    # any other tool quoting the path (Rust's "failed to create directory `/x`: Read-only
    # file system (os error 30)", Go's "open /x: permission denied" is not quoted)
    _rule("quoted-erofs", rf"{_Q}(?P<x>/[^'\u2019\"`]+){_Q}: Read-only file system", _read_only),
    _rule("quoted-eacces", rf"{_Q}(?P<x>/[^'\u2019\"`]+){_Q}: Permission denied \(os error 13\)",
          _denied),
    # name lookups and unreachable networks
    _rule("curl-resolve", r"Could not resolve host: (?P<x>[^\s)]+)", _no_network),
    _rule("node-getaddrinfo", r"getaddrinfo (?:ENOTFOUND|EAI_AGAIN) (?P<x>\S+)", _no_network),
    _rule("python-gaierror", r"(?:gaierror|NameResolutionError|socket\.gaierror).*"
          r"(?:Temporary failure in name resolution|Name or service not known)", _no_network),
    _rule("name-resolution", r"(?:Temporary failure in name resolution|unable to resolve host "
          r"address '?(?P<x>[^'\s]+)'?)", _no_network),
    _rule("unreachable", r"(?:ENETUNREACH|Network is unreachable)", _no_network),
    # pnpm (and npm): "[ERROR] GET https://registry.npmjs.org/pnpm: fetch failed"; the
    # registry's pnpm packages: the version package.json `packageManager` pins
    _rule("pnpm-pin-fetch", r"GET https?://(?P<x>[^/\s:]+)\S*/(?:pnpm|@pnpm%2[Ff]\w+): fetch "
          r"failed", _pnpm_pin),
    _rule("fetch-failed", r"GET https?://(?P<x>[^/\s:]+)\S*: fetch failed", _no_network),
)  # fmt: skip


def _line(text: str) -> str:
    text = text.strip()
    return text if len(text) <= LINE_LIMIT else text[:LINE_LIMIT] + " [truncated]"


def find_cause(stderr: str, ctx: SandboxContext) -> SandboxCause | None:
    """The first stderr line that shows a cause the sandbox made, or None."""
    # split on \n only: a carriage return inside a line is evidence (a CRLF shebang)
    for raw in stderr.split("\n")[:MAX_LINES]:
        line = raw.strip()[: LINE_LIMIT * 2]
        if not line:
            continue
        for rule in RULES:
            found = rule.pattern.search(line)
            if found is None:
                continue
            subject = (found.groupdict().get("x") or "").strip()
            explained = rule.explain(subject, ctx)
            if explained is None:
                continue
            return SandboxCause(explained[0], _line(raw), explained[1], subject)
    return None


def diagnose(exit_code: int | None, stderr: str, ctx: SandboxContext) -> SandboxCause | None:
    """What the sandbox caused, from the exit code and stderr; None when nothing shows.

    Exit 127 and 126 are the shell's own codes for "not found" and "cannot execute": when no
    stderr line names the program, the cause is still stated, without a name.
    """
    cause = find_cause(stderr, ctx)
    if cause is not None or exit_code not in (126, 127):
        return cause
    if exit_code == 127:
        return SandboxCause(
            CauseKind.MISSING_PROGRAM, "",
            f"exit code 127 means a program the command runs was not found in {_image(ctx)} "
            f"(stderr does not name it): {_IMAGE_FIX}",
        )  # fmt: skip
    return SandboxCause(
        CauseKind.NOT_EXECUTABLE, "",
        "exit code 126 means a program the command runs could not be executed (not "
        "executable, or not a Linux program): `chmod +x` the script and commit the mode",
    )  # fmt: skip
