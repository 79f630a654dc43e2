"""Failures the sandbox caused, told apart from the hook's own verdict (table-driven)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.plan import build_plan
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.protocol.results import Execution, ExecutionStatus, HookResult, classify
from cloudrunner.protocol.sandbox_causes import (
    CauseKind,
    SandboxContext,
    diagnose,
    find_cause,
)
from tests.unit.protocol.helpers import source

WS = "/srv/ws/app"
CTX = SandboxContext(
    image="cloudrunner/hook-runtime:latest", hook_user="10001:10001", workspace=WS, network="none"
)

MISSING = CauseKind.MISSING_PROGRAM
SCRIPT = CauseKind.MISSING_SCRIPT
NOEXEC = CauseKind.NOT_EXECUTABLE
WSRO = CauseKind.WORKSPACE_NOT_WRITABLE
RO = CauseKind.READ_ONLY_OUTSIDE_WORKSPACE
NET = CauseKind.NO_NETWORK
STREAM = CauseKind.STANDARD_STREAM
OWNER = CauseKind.NOT_OWNER

# (stderr line, exit code, kind, subject)
TABLE: list[tuple[str, int, CauseKind, str]] = [
    # programs missing from the image
    ("sh: 1: python: not found", 127, MISSING, "python"),
    ("/bin/sh: 1: npx: not found", 127, MISSING, "npx"),
    ("sh: pnpm: not found", 127, MISSING, "pnpm"),
    ("bash: uv: command not found", 127, MISSING, "uv"),
    ("bash: line 1: bun: command not found", 127, MISSING, "bun"),
    (f"{WS}/.cursor/hooks/fmt.sh: line 12: prettier: command not found", 127, MISSING,
     "prettier"),
    ("zsh:1: command not found: pwsh", 127, MISSING, "pwsh"),
    ("env: 'python': No such file or directory", 127, MISSING, "python"),
    ("/usr/bin/env: 'python': No such file or directory", 127, MISSING, "python"),
    ("/usr/bin/env: \u2018deno\u2019: No such file or directory", 127, MISSING, "deno"),
    ("/usr/bin/env: 'bun': No such file or directory", 127, MISSING, "bun"),
    ("bash: ./x.py: /usr/local/bin/python3.12: bad interpreter: No such file or directory", 126,
     MISSING, "/usr/local/bin/python3.12"),
    ("bash: ./x: cannot execute: required file not found", 127, MISSING, "./x"),
    ("Error: spawn npx ENOENT", 1, MISSING, "npx"),
    ("Error: spawnSync rg ENOENT", 1, MISSING, "rg"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'sqlite3'", 1, MISSING, "sqlite3"),
    # scripts that are not where the hook looks
    ("sh: 1: .cursor/hooks/guard.sh: not found", 127, SCRIPT, ".cursor/hooks/guard.sh"),
    (f"python3: can't open file '{WS}/hooks/x.py': [Errno 2] No such file or directory", 2,
     SCRIPT, f"{WS}/hooks/x.py"),
    ("Error: Cannot find module '/Users/me/.cursor/hooks/audit.js'", 1, SCRIPT,
     "/Users/me/.cursor/hooks/audit.js"),
    ("sh: 0: cannot open .cursor/hooks/x.sh: No such file", 2, SCRIPT, ".cursor/hooks/x.sh"),
    ("bash: hooks/run.sh: No such file or directory", 127, SCRIPT, "hooks/run.sh"),
    # files and directories the sandbox does not have
    ("sh: 1: cd: can't cd to packages/web", 2, CauseKind.MISSING_PATH, "packages/web"),
    (f"bash: line 1: cd: {WS}/frontend: No such file or directory", 1, CauseKind.MISSING_PATH,
     f"{WS}/frontend"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/root/.cursor/transcripts/t.jsonl'",
     1, CauseKind.MISSING_PATH, "/root/.cursor/transcripts/t.jsonl"),
    ("Error: ENOENT: no such file or directory, open '/Users/me/.config/guard.json'", 1,
     CauseKind.MISSING_PATH, "/Users/me/.config/guard.json"),
    # not executable, CRLF, wrong binary
    ("sh: 1: .cursor/hooks/guard.sh: Permission denied", 126, NOEXEC, ".cursor/hooks/guard.sh"),
    ("/bin/sh: 1: ./hooks/x: Permission denied", 126, NOEXEC, "./hooks/x"),
    ("bash: ./run.sh: Permission denied", 126, NOEXEC, "./run.sh"),
    ("/usr/bin/env: 'bash\\r': No such file or directory", 127, CauseKind.CRLF_SHEBANG, "bash"),
    ("/usr/bin/env: 'bash\r': No such file or directory", 127, CauseKind.CRLF_SHEBANG, "bash"),
    ("sh: 1: ./tool: cannot execute binary file: Exec format error", 126,
     CauseKind.EXEC_FORMAT, "./tool"),
    # workspace not writable by the hook uid
    (f"PermissionError: [Errno 13] Permission denied: '{WS}/.cursor/state.json'", 1, WSRO,
     f"{WS}/.cursor/state.json"),
    (f"Error: EACCES: permission denied, open '{WS}/.cursor/log.txt'", 1, WSRO,
     f"{WS}/.cursor/log.txt"),
    (f"sh: 1: cannot create {WS}/.hooklog: Permission denied", 2, WSRO, f"{WS}/.hooklog"),
    (f"touch: cannot touch '{WS}/.marker': Permission denied", 1, WSRO, f"{WS}/.marker"),
    (f"mkdir: cannot create directory \u2018{WS}/.state\u2019: Permission denied", 1, WSRO,
     f"{WS}/.state"),
    ("PermissionError: [Errno 13] Permission denied: '.cursor/memory.json'", 1, WSRO,
     ".cursor/memory.json"),
    (f"fatal: could not open '{WS}/.git/index.lock' for writing: Permission denied", 128, WSRO,
     f"{WS}/.git/index.lock"),
    # read-only outside the workspace
    ("OSError: [Errno 30] Read-only file system: '/home/hook/.cache'", 1, RO, "/home/hook/.cache"),
    ("PermissionError: [Errno 13] Permission denied: '/root/.hooks.log'", 1, RO,
     "/root/.hooks.log"),
    ("Error: EROFS: read-only file system, mkdir '/home/hook/.npm'", 1, RO, "/home/hook/.npm"),
    ("touch: cannot touch '/usr/x': Read-only file system", 1, RO, "/usr/x"),
    ("  cause: failed to create directory `/home/hook/.cache/uv`: Read-only file system (os "
     "error 30)", 2, RO, "/home/hook/.cache/uv"),
    (f"error: failed to open file `{WS}/uv.lock`: Permission denied (os error 13)", 2, WSRO,
     f"{WS}/uv.lock"),
    # a mode change of a workspace file root owns (hooks never run as root)
    (f"chmod: changing permissions of '{WS}/bin/run': Operation not permitted", 1, OWNER,
     f"{WS}/bin/run"),
    (f"PermissionError: [Errno 1] Operation not permitted: '{WS}/x.sh'", 1, OWNER, f"{WS}/x.sh"),
    (f"Error: EPERM: operation not permitted, chmod '{WS}/hook.js'", 1, OWNER, f"{WS}/hook.js"),
    ("chmod: changing permissions of 'scripts/a.sh': Operation not permitted", 1, OWNER,
     "scripts/a.sh"),
    # the hook's own streams by path, refused (a pipe of another uid)
    ("jq: error: Could not open file /dev/stdin: Permission denied", 2, STREAM, "/dev/stdin"),
    ("cat: /dev/stdin: Permission denied", 1, STREAM, "/dev/stdin"),
    ("sh: 1: cannot create /dev/stderr: Permission denied", 2, STREAM, "/dev/stderr"),
    ("tee: /dev/stdout: Permission denied", 1, STREAM, "/dev/stdout"),
    ("PermissionError: [Errno 13] Permission denied: '/dev/stdin'", 1, STREAM, "/dev/stdin"),
    ("Error: EACCES: permission denied, open '/dev/stdin'", 1, STREAM, "/dev/stdin"),
    ("bash: /proc/self/fd/0: Permission denied", 1, STREAM, "/proc/self/fd/0"),
    ("sh: 3: cannot open /dev/fd/0: Permission denied", 2, STREAM, "/dev/fd/0"),
    # another process's descriptors are not the hook's streams: the generic rule
    ("sh: 5: cannot create /proc/1/fd/0: Permission denied", 2, RO, "/proc/1/fd/0"),
    # no network
    ("curl: (6) Could not resolve host: api.example.com", 6, NET, "api.example.com"),
    ("fatal: unable to access 'https://github.com/a/b/': Could not resolve host: github.com", 128,
     NET, "github.com"),
    ("Error: getaddrinfo ENOTFOUND registry.npmjs.org", 1, NET, "registry.npmjs.org"),
    ("Error: getaddrinfo EAI_AGAIN api.openai.com", 1, NET, "api.openai.com"),
    ("socket.gaierror: [Errno -3] Temporary failure in name resolution", 1, NET, ""),
    ("wget: unable to resolve host address 'example.org'", 4, NET, "example.org"),
    ("OSError: [Errno 101] Network is unreachable", 1, NET, ""),
    ("[ERROR] GET https://registry.npmjs.org/left-pad: fetch failed", 1, NET,
     "registry.npmjs.org"),
    ("[ERROR] GET https://registry.npmjs.org/pnpm: fetch failed", 1, NET, "registry.npmjs.org"),
    ("[WARN] Cannot use the pnpm version this project pins: ERR_PNPM_META_FETCH_FAIL: GET "
     "https://registry.npmjs.org/@pnpm%2Fexe: fetch failed", 0, NET, "registry.npmjs.org"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "code", "kind", "subject"), TABLE)
def test_each_stderr_line_names_its_cause(
    line: str, code: int, kind: CauseKind, subject: str
) -> None:
    stderr = f"some earlier output\n  {line}  \nand a later line\n"
    cause = diagnose(code, stderr, CTX)
    assert cause is not None, line
    assert (cause.kind, cause.subject) == (kind, subject)
    assert cause.line == line.strip()


@pytest.mark.parametrize(
    ("kind", "fragments"),
    [
        (MISSING, ["is not in image cloudrunner/hook-runtime:latest",
                   ".cursor/environment.json or the runtime image"]),
        (WSRO, ["the workspace is not writable by the hook uid 10001"]),
        (RO, ["only the workspace and /tmp are writable"]),
        (NET, ["no network for project hooks"]),
        (OWNER, ["belongs to another user than the hook uid 10001", "never as root",
                 "chown -R"]),
        (STREAM, ["its own /dev/stdin by path", "uid 10001", "the sandbox's fault",
                  "readFileSync(0)"]),
        (NOEXEC, ["chmod +x", "git update-index --chmod=+x"]),
        (CauseKind.CRLF_SHEBANG, ["CRLF"]),
        (SCRIPT, ["was not found", "is not where the hook looks", "#!/usr/bin/env"]),
    ],
)  # fmt: skip
def test_every_message_names_the_cause_and_the_fix(kind: CauseKind, fragments: list[str]) -> None:
    line, code, _, _ = next(row for row in TABLE if row[2] is kind)
    cause = diagnose(code, line, CTX)
    assert cause is not None
    for fragment in fragments:
        assert fragment in cause.message


def test_a_missing_file_in_the_workspace_or_tmp_is_the_hooks_own_business() -> None:
    for path in (f"{WS}/.cursor/state.json", "/tmp/cache.json", "rel/state.json"):
        assert diagnose(1, f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'",
                        CTX) is None  # fmt: skip
        assert diagnose(1, f"Error: ENOENT: no such file or directory, open '{path}'", CTX) is None


def test_a_read_only_home_names_the_cache_settings() -> None:
    cause = diagnose(1, "OSError: [Errno 30] Read-only file system: '/home/hook/.npm'", CTX)
    assert cause is not None and "home directory" in cause.message
    assert "UV_CACHE_DIR" in cause.message


def test_first_matching_line_wins() -> None:
    stderr = "bash: npx: command not found\ncurl: (6) Could not resolve host: x.example\n"
    cause = find_cause(stderr, CTX)
    assert cause is not None and cause.subject == "npx"


def test_a_hooks_own_verdicts_are_not_mistaken_for_the_sandbox() -> None:
    for stderr in [
        "refusing: rm -rf is not allowed",
        "no network here",
        "tests failed: 3 not found in snapshot",
        "Permission denied by policy: secrets in prompt",
        "command not found in allowlist",
        "",
    ]:
        assert diagnose(1, stderr, CTX) is None, stderr
        assert diagnose(2, stderr, CTX) is None, stderr


def test_exit_127_and_126_without_a_telling_line_still_say_what_they_mean() -> None:
    missing = diagnose(127, "", CTX)
    assert missing is not None and missing.kind is MISSING and missing.line == ""
    assert "exit code 127" in missing.message and "hook-runtime:latest" in missing.message
    noexec = diagnose(126, "weird\n", CTX)
    assert noexec is not None and noexec.kind is NOEXEC


def test_a_lookup_on_an_allowed_network_names_that_network() -> None:
    ctx = SandboxContext(image="i", hook_user="10001", workspace=WS, network="egress")
    cause = diagnose(6, "curl: (6) Could not resolve host: a.example", ctx)
    assert cause is not None and "'egress'" in cause.message
    assert "no network for project hooks" not in cause.message


def test_a_lookup_of_an_enterprise_hook_without_a_network_names_its_setting() -> None:
    ctx = SandboxContext(image="i", workspace=WS, network="none", source="enterprise")
    cause = diagnose(1, "Error: getaddrinfo ENOTFOUND a.example", ctx)
    assert cause is not None
    assert cause.message.startswith("no network for enterprise hooks here")
    assert "sandbox.per_source.enterprise.network" in cause.message


def test_a_relative_path_of_a_team_hook_is_in_its_read_only_directory() -> None:
    ctx = SandboxContext(image="i", hook_user="10001", workspace=WS, source="team")
    cause = diagnose(1, "PermissionError: [Errno 13] Permission denied: 'state.json'", ctx)
    assert cause is not None and cause.kind is RO


def test_a_path_that_only_starts_like_the_workspace_is_outside_it() -> None:
    cause = diagnose(1, f"PermissionError: [Errno 13] Permission denied: '{WS}2/x'", CTX)
    assert cause is not None and cause.kind is RO


@given(st.text(max_size=400))
def test_any_stderr_is_read_without_raising(stderr: str) -> None:
    cause = diagnose(1, stderr, CTX)
    if cause is not None:
        assert cause.line.removesuffix(" [truncated]") in stderr
        assert cause.message


# --- how a cause reaches the outcome and the answer ------------------------------------


def _classify(event: str, code: int, stderr: str, fail_closed: bool = False) -> HookResult:
    src = source(
        SourceKind.PROJECT,
        {event: [{"command": "python -c 'x'", "failClosed": fail_closed, "timeout": 3}]},
    )
    hook = build_plan([src], event, {}).hooks_to_run[0]
    cause = diagnose(code, stderr, CTX)
    execution = Execution(ExecutionStatus.OK, code, b"", stderr.encode(), cause=cause)
    return classify(hook, EVENTS[event], execution)


def test_fail_closed_block_message_names_the_missing_program_and_the_fix() -> None:
    r = _classify("preToolUse", 127, "sh: 1: python: not found\n", fail_closed=True)
    assert r.outcome is Outcome.ERROR and r.fail_closed_block
    message = r.output["agent_message"]
    assert "exit code 127: `python` is not in image cloudrunner/hook-runtime:latest" in message
    assert ".cursor/environment.json" in message
    assert r.sandbox_cause is not None
    assert r.sandbox_cause.line == "sh: 1: python: not found"


def test_a_swallowed_eacces_keeps_ok_and_says_so_in_the_reason() -> None:
    stderr = f"PermissionError: [Errno 13] Permission denied: '{WS}/.cursor/x'"
    r = _classify("afterFileEdit", 0, stderr)
    assert r.outcome is Outcome.OK
    assert r.reason.startswith("exit code 0; stderr shows")
    assert "not writable by the hook uid 10001" in r.reason


def test_a_block_whose_stderr_shows_eacces_tells_the_agent() -> None:
    stderr = f"sh: 1: cannot create {WS}/.hooklog: Permission denied"
    r = _classify("beforeShellExecution", 2, stderr)
    assert r.outcome is Outcome.BLOCKED
    message = r.output["agent_message"]
    assert message.startswith(stderr)
    assert "(cloudrunner: the workspace is not writable by the hook uid 10001" in message


def test_a_block_by_a_script_missing_from_the_repository_reads_as_on_the_agents_machine() -> None:
    # the same checkout on the agent's VM lacks the script too: the agent gets the hook's
    # own words, as it would there; the record keeps the diagnosis
    stderr = f"python3: can't open file '{WS}/./hooks/x.py': [Errno 2] No such file or directory"
    r = _classify("beforeShellExecution", 2, stderr)
    assert r.outcome is Outcome.BLOCKED
    assert r.output["agent_message"] == stderr
    assert r.sandbox_cause is not None and "does not exist" in r.reason


def test_without_a_cause_nothing_changes() -> None:
    r = _classify("preToolUse", 1, "my own failure\n", fail_closed=True)
    assert r.reason == "exit code 1"
    assert r.sandbox_cause is None


def test_a_pnpm_pin_the_image_lacks_names_package_manager_and_the_fixes() -> None:
    cause = find_cause("[ERROR] GET https://registry.npmjs.org/pnpm: fetch failed\n", CTX)
    assert cause is not None and cause.kind is NET
    for fragment in ("`packageManager`", "cloudrunner/hook-runtime:latest lacks",
                     "no network for project hooks", "pmOnFail: warn"):  # fmt: skip
        assert fragment in cause.message
    other = find_cause("[ERROR] GET https://registry.npmjs.org/left-pad: fetch failed", CTX)
    assert other is not None and "packageManager" not in other.message


def test_a_mode_change_outside_the_workspace_is_not_the_checkouts_owner() -> None:
    """The image's files are root's on a VM too: no cause is claimed for them."""
    assert find_cause("chmod: changing permissions of '/usr/bin/git': Operation not "
                      "permitted", CTX) is None  # fmt: skip
