"""The per-event client's answer when no daemon answers: the fail policy (flags, then
CLOUDRUNNER_FAIL_CLOSED, then the `fail-policy.json` the daemon publishes in its run
directory) and the `fallback.spool` line recording the answer for the daemon's audit log.

Both clients (`cloudrunner hook` here, the compiled `cloudrunner-hook` in client/) do
exactly this, and the daemon writes the policy file and ingests the spool: the file names,
the bound and the line format are a contract between the three. Imported only once no
daemon answered (never on the success path), so json and hashlib cost nothing there.
"""

import json
import os
import stat
import time

from cloudrunner.client import Endpoint, env_var, os_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

POLICY_NAME = "fail-policy.json"
POLICY_VERSION = 1
#: the policy file's bound: a larger file is not usable (the daemon's is a few hundred bytes)
POLICY_MAX_BYTES = 1024 * 1024
#: the policy's nesting bound (its own is two levels deep)
POLICY_MAX_DEPTH = 64
SPOOL_NAME = "fallback.spool"
SPOOL_VERSION = 1
#: the spool's bound: a line that would take the file past it is not written
SPOOL_MAX_BYTES = 1024 * 1024
#: each spool line's bound, newline included
SPOOL_LINE_MAX_BYTES = 4096
#: `client` in a spool line
CLIENT_NAME = "cloudrunner hook"
_ID_MAX_CHARS = 200


def run_dir(endpoint: Endpoint) -> "str | None":
    """Where the policy file and the spool live: the socket's directory, or for a TCP
    endpoint $CLOUDRUNNER_STATE_DIR when it is set (otherwise none)."""
    if endpoint.socket_path is not None:
        head, slash, _ = endpoint.socket_path.rpartition("/")
        return (head or "/") if slash else "."
    state = env_var("CLOUDRUNNER_STATE_DIR")
    if not state:
        return None
    return state.rstrip("/") or "/"


def _join(directory: str, name: str) -> str:
    return f"/{name}" if directory == "/" else f"{directory}/{name}"


class Decision:
    """How the client answers an event no daemon answered, and why."""

    __slots__ = ("closed", "decided_by", "notes", "policy_daemon", "policy_path")

    def __init__(self, closed: bool, decided_by: str) -> None:
        self.closed = closed
        self.decided_by = decided_by  # flag, env, policy or no-policy
        self.notes: list[str] = []  # stderr lines after the answer's own
        self.policy_daemon: str | None = None
        self.policy_path: str | None = None


def decide(
    event: str, flag: "bool | None", env: "bool | None", directory: "str | None"
) -> Decision:
    """The flags (--fail-closed / --fail-open), then the variable, then the policy file."""
    if flag is not None:
        return Decision(flag, "flag")
    if env is not None:
        return Decision(env, "env")
    if directory is None:
        decision = Decision(False, "no-policy")
        decision.notes.append(
            "cloudrunner: no fail policy for a TCP daemon unless CLOUDRUNNER_STATE_DIR names "
            "its state directory; failing open"
        )
        return decision
    path = _join(directory, POLICY_NAME)
    try:
        raw = _read_policy(path)
    except FileNotFoundError:
        decision = Decision(False, "no-policy")
        decision.notes.append(f"cloudrunner: no fail policy was published at {path}; failing open")
        return decision
    except _NotUsable as exc:
        return _unusable(path, str(exc))
    except OSError as exc:
        return _unusable(path, os_text(exc))
    if _nesting_over(raw, POLICY_MAX_DEPTH):
        return _unusable(path, f"nested deeper than {POLICY_MAX_DEPTH} levels")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return _unusable(path, "not valid JSON")
    if not isinstance(data, dict):
        return _unusable(path, "not a JSON object")
    if data.get("version") != POLICY_VERSION or isinstance(data.get("version"), bool):
        return _unusable(path, f"version is not {POLICY_VERSION}")
    events = data.get("fail_closed_events")
    if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
        return _unusable(path, "fail_closed_events is not a list of event names")
    daemon = data.get("daemon")
    decision = Decision(event in events, "policy")
    decision.policy_path = path
    decision.policy_daemon = daemon if isinstance(daemon, str) else None
    return decision


class _NotUsable(Exception):
    """The policy file is there but is not one the client can read (why in the text)."""


def _read_policy(path: str) -> bytes:
    """The policy's bytes, read so that nothing planted in its place can delay the answer:
    opened without blocking (a FIFO with no writer, or one that never stops writing), used
    only when it is a regular file (never a FIFO, socket or device such as /dev/zero, also
    through a symbolic link), and read to at most POLICY_MAX_BYTES."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _NotUsable("not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= POLICY_MAX_BYTES:
            chunk = os.read(fd, POLICY_MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > POLICY_MAX_BYTES:
            raise _NotUsable(f"larger than {POLICY_MAX_BYTES} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _nesting_over(raw: bytes, limit: int) -> bool:
    """Whether JSON text nests arrays or objects deeper than `limit` (brackets inside
    strings do not count). A policy is two levels deep; the check spares the parser a
    recursion it may not survive."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def _unusable(path: str, why: str) -> Decision:
    decision = Decision(False, "no-policy")
    decision.notes.append(
        f"cloudrunner: the fail policy {path} is not usable ({why}); failing open"
    )
    return decision


# --------------------------------------------------------------------------- spool


def spool_line(
    event: str,
    answer: "dict[str, Any]",
    blocked: bool,
    problem: str,
    decision: Decision,
    payload: bytes,
) -> bytes:
    """One JSON Lines record of an event answered without a daemon (at most 4096 bytes)."""
    import hashlib

    conversation = generation = None
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        value = data.get("conversation_id")
        conversation = value[:_ID_MAX_CHARS] if isinstance(value, str) else None
        value = data.get("generation_id")
        generation = value[:_ID_MAX_CHARS] if isinstance(value, str) else None
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
    record = {
        "version": SPOOL_VERSION,
        "time": stamp,
        "event": event[:_ID_MAX_CHARS],
        "outcome": "blocked" if blocked else "allowed",
        "answer": answer,
        "problem": problem,
        "decided_by": decision.decided_by,
        "policy_daemon": decision.policy_daemon,
        "client": CLIENT_NAME,
        "pid": os.getpid(),
        "conversation_id": conversation,
        "generation_id": generation,
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    for limit in (None, 1000, 200):
        if limit is not None:
            record["problem"] = problem[:limit]
            record["answer"] = {
                k: v[:limit] if isinstance(v, str) else v for k, v in answer.items()
            }
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        raw = line.encode("utf-8", "replace")
        if len(raw) <= SPOOL_LINE_MAX_BYTES:
            break
    return raw


def append_spool(directory: "str | None", line: bytes) -> "str | None":
    """Append the line to the spool (one write); the stderr line when it was not recorded."""
    if directory is None:
        return (
            "cloudrunner: this event is not recorded in a fallback spool (a TCP daemon's spool "
            "needs CLOUDRUNNER_STATE_DIR)"
        )
    path = _join(directory, SPOOL_NAME)
    try:
        # never through a link planted in the spool's place, never blocked on a FIFO there
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(path, flags | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        return f"cloudrunner: cannot write the fallback spool {path} ({os_text(exc)}); this event is not recorded"  # noqa: E501
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return f"cloudrunner: cannot write the fallback spool {path} (not a regular file); this event is not recorded"  # noqa: E501
        if os.fstat(fd).st_size + len(line) > SPOOL_MAX_BYTES:
            return (
                f"cloudrunner: the fallback spool {path} is full (1 MiB); "
                "this event is not recorded"
            )
        written = os.write(fd, line)
        if written != len(line):
            return f"cloudrunner: cannot write the fallback spool {path} (short write); this event is not recorded"  # noqa: E501
    except OSError as exc:
        return f"cloudrunner: cannot write the fallback spool {path} ({os_text(exc)}); this event is not recorded"  # noqa: E501
    finally:
        os.close(fd)
    return None
