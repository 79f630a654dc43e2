"""Every diagnostic code, defined once, with what it means (as `refusals.py` does for the
HTTP API's error codes): `cloudrunner validate`, the worker's audit records and the tests
read these codes, so a code is a stable name, spelled only here. Standard library only."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class DiagnosticCode(StrEnum):
    # a hooks file as JSON (config, claude_config)
    EMPTY_FILE = "empty-file"
    NOT_UTF8 = "not-utf8"
    JSON_SYNTAX = "json-syntax"
    TOO_DEEP = "too-deep"
    DUPLICATE_KEY = "duplicate-key"
    NOT_AN_OBJECT = "not-an-object"
    WRONG_TYPE = "wrong-type"
    UNKNOWN_VERSION = "unknown-version"
    EVENT_AT_TOP_LEVEL = "event-at-top-level"
    UNKNOWN_KEY = "unknown-key"
    NO_HOOKS = "no-hooks"
    UNKNOWN_EVENT = "unknown-event"
    MISSING_COMMAND = "missing-command"
    EMPTY_COMMAND = "empty-command"
    MISSING_PROMPT = "missing-prompt"
    IGNORED_KEY = "ignored-key"
    LOOP_LIMIT_IGNORED = "loop-limit-ignored"
    FAIL_CLOSED_IGNORED = "fail-closed-ignored"
    LONG_TIMEOUT = "long-timeout"
    MATCHER_IGNORED = "matcher-ignored"
    INVALID_MATCHER = "invalid-matcher"
    HOOKS_DISABLED = "hooks-disabled"
    # reading a file of a repository or of the operator (workspace.repo_files)
    SYMLINK_ESCAPE = "symlink-escape"
    DANGLING_SYMLINK = "dangling-symlink"
    UNREADABLE = "unreadable"
    NOT_REGULAR = "not-regular"
    TOO_LARGE = "too-large"
    # loading the sources (sources)
    SOURCE_ABSENT = "source-absent"
    SOURCE_SKIPPED = "source-skipped"
    SOURCE_NOT_ALLOWED = "source-not-allowed"
    SOURCE_DISABLED = "source-disabled"
    UNTRUSTED_WORKSPACE = "untrusted-workspace"
    MANAGED_PATH_REFUSED = "managed-path-refused"
    HOOK_SKIPPED = "hook-skipped"
    CLAUDE_CODE_OFF = "claude-code-off"
    PROJECT_APPROVED = "project-approved"
    PROJECT_NOT_APPROVED = "project-not-approved"
    PROJECT_DIGEST_FAILED = "project-digest-failed"
    PROJECT_DIGEST_UNCOVERED = "project-digest-uncovered"
    PROJECT_DIGEST_UNSEEN = "project-digest-unseen"
    # `cloudrunner validate` (validate)
    SCRIPT_NOT_FOUND = "script-not-found"
    SCRIPT_OUTSIDE = "script-outside"
    PROGRAM_NOT_IN_IMAGE = "program-not-in-image"
    IMAGE_CHECKED = "image-checked"
    IMAGE_CHECK_SKIPPED = "image-check-skipped"
    MATCHER_NEVER_MATCHES = "matcher-never-matches"
    MATCHER_NOT_JAVASCRIPT = "matcher-not-javascript"
    MATCHER_BACKTRACKING = "matcher-backtracking"
    NEEDS_NETWORK = "needs-network"


#: what each code means, for the docs and for a reader of a record
MEANINGS: Mapping[DiagnosticCode, str] = {
    DiagnosticCode.EMPTY_FILE: "the hooks file is empty",
    DiagnosticCode.NOT_UTF8: "the hooks file is not UTF-8 text",
    DiagnosticCode.JSON_SYNTAX: "the hooks file is not valid JSON",
    DiagnosticCode.TOO_DEEP: "the JSON is nested too deeply to be a hooks file",
    DiagnosticCode.DUPLICATE_KEY: "a key appears twice in one object; the last one counts",
    DiagnosticCode.NOT_AN_OBJECT: "the document is not a JSON object",
    DiagnosticCode.WRONG_TYPE: "a value has the wrong JSON type",
    DiagnosticCode.UNKNOWN_VERSION: "`version` is not the one version the protocol knows",
    DiagnosticCode.EVENT_AT_TOP_LEVEL: "an event name stands at the top level, not in `hooks`",
    DiagnosticCode.UNKNOWN_KEY: "a key the protocol does not know; it is ignored",
    DiagnosticCode.NO_HOOKS: "the file defines no hooks",
    DiagnosticCode.UNKNOWN_EVENT: "a hook names an event that does not exist",
    DiagnosticCode.MISSING_COMMAND: "a command hook has no `command`",
    DiagnosticCode.EMPTY_COMMAND: "a command hook's `command` is empty",
    DiagnosticCode.MISSING_PROMPT: "a prompt hook has no `prompt`",
    DiagnosticCode.IGNORED_KEY: "a key that does not apply to this kind of hook; ignored",
    DiagnosticCode.LOOP_LIMIT_IGNORED: "`loop_limit` on an event that has no follow-ups",
    DiagnosticCode.FAIL_CLOSED_IGNORED: "`failClosed` on an event whose answer cannot block",
    DiagnosticCode.LONG_TIMEOUT: "a timeout over an hour (`timeout` is in seconds)",
    DiagnosticCode.MATCHER_IGNORED: "a matcher on an event that has nothing to match",
    DiagnosticCode.INVALID_MATCHER: "a matcher that is not a valid regular expression",
    DiagnosticCode.HOOKS_DISABLED: "a Claude Code settings file turns all its hooks off",
    DiagnosticCode.SYMLINK_ESCAPE: "a symlink that leads out of the directory it is read in",
    DiagnosticCode.DANGLING_SYMLINK: "a symlink to a file that does not exist",
    DiagnosticCode.UNREADABLE: "a file that exists but cannot be read",
    DiagnosticCode.NOT_REGULAR: "a path that is not a regular file (a directory, a FIFO)",
    DiagnosticCode.TOO_LARGE: "a file over the size limit for its kind",
    DiagnosticCode.SOURCE_ABSENT: "a source has no file, or none is configured",
    DiagnosticCode.SOURCE_SKIPPED: "the profile does not load this source",
    DiagnosticCode.SOURCE_NOT_ALLOWED: "the operator does not allow this source (sources.allowed)",
    DiagnosticCode.SOURCE_DISABLED: "a source whose file has errors; the other sources run",
    DiagnosticCode.UNTRUSTED_WORKSPACE: (
        "the workspace is not trusted, so its project hooks do not load"
    ),
    DiagnosticCode.MANAGED_PATH_REFUSED: "an operator's hooks path is relative or in the workspace",
    DiagnosticCode.HOOK_SKIPPED: "a hook the profile does not load (its event, its type)",
    DiagnosticCode.CLAUDE_CODE_OFF: "Claude Code settings found while sources.claude_code is off",
    DiagnosticCode.PROJECT_APPROVED: "the pinned project hooks' digest is approved",
    DiagnosticCode.PROJECT_NOT_APPROVED: "the project hooks' digest is not approved; not loaded",
    DiagnosticCode.PROJECT_DIGEST_FAILED: "the pinned project hooks' digest cannot be taken",
    DiagnosticCode.PROJECT_DIGEST_UNCOVERED: "a pinned hook may run files its digest misses",
    DiagnosticCode.PROJECT_DIGEST_UNSEEN: "part of a pinned command the digest cannot see",
    DiagnosticCode.SCRIPT_NOT_FOUND: "a script a hook runs does not exist",
    DiagnosticCode.SCRIPT_OUTSIDE: "a script a hook runs lies outside the repository",
    DiagnosticCode.PROGRAM_NOT_IN_IMAGE: "a program a hook runs is not in the hook image",
    DiagnosticCode.IMAGE_CHECKED: "the programs were checked against an image",
    DiagnosticCode.IMAGE_CHECK_SKIPPED: "the programs could not be checked against an image",
    DiagnosticCode.MATCHER_NEVER_MATCHES: "a matcher that no subject of its event can match",
    DiagnosticCode.MATCHER_NOT_JAVASCRIPT: "a matcher in a syntax that JavaScript reads otherwise",
    DiagnosticCode.MATCHER_BACKTRACKING: "a matcher shaped for catastrophic backtracking",
    DiagnosticCode.NEEDS_NETWORK: "a command that needs the network where its source has none",
}
if set(MEANINGS) != set(DiagnosticCode):  # pragma: no cover - a code added without a meaning
    raise AssertionError("every DiagnosticCode needs its meaning in MEANINGS")
