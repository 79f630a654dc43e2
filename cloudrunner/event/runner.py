"""Running one event's plan: tiers in priority order, hooks of a tier concurrently (bounded),
each in its source's sandbox, each outcome classified by the protocol core.

The protocol's `run_tiers` owns the tier logic (a block skips lower tiers); this module
supplies the part that touches the world: which sandbox a hook runs in, with what
environment, and how a sandbox's `ExecResult` becomes the protocol's `Execution`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cloudrunner import telemetry
from cloudrunner.event import transcript
from cloudrunner.event.hook_env import Passed
from cloudrunner.protocol import sandbox_causes
from cloudrunner.protocol.claude_io import claude_stdin, wants_last_message
from cloudrunner.protocol.merge import run_tiers
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.plan import Plan
from cloudrunner.protocol.planned_hook import PlannedHook
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.protocol.results import Execution, ExecutionStatus, HookResult
from cloudrunner.sandbox.base import ExecRequest, ExecResult, Sandbox

#: opens the sandbox for one source kind; its working directory is mounted read-only
SandboxOpener = Callable[[SourceKind, Path], Sandbox]

_STATUS = {
    Outcome.OK: ExecutionStatus.OK,
    Outcome.ERROR: ExecutionStatus.OK,  # a non-zero exit: the protocol reads the code
    Outcome.TIMEOUT: ExecutionStatus.TIMEOUT,
    Outcome.OOM: ExecutionStatus.OOM,
    Outcome.OUTPUT_OVERFLOW: ExecutionStatus.OUTPUT_OVERFLOW,
    Outcome.SANDBOX_ERROR: ExecutionStatus.SANDBOX_ERROR,
}


def to_execution(
    result: ExecResult, workspace: Path | None = None, source: SourceKind | None = None
) -> Execution:
    status = _STATUS.get(result.outcome, ExecutionStatus.SANDBOX_ERROR)
    message = result.message
    if result.outcome not in _STATUS:
        message = f"the sandbox answered with outcome {result.outcome}: {message}"
    cause = None
    if status is ExecutionStatus.OK:
        cause = sandbox_causes.diagnose(
            result.exit_code,
            result.stderr.decode("utf-8", errors="replace"),
            sandbox_context(result, workspace, source),
        )
    return Execution(status, result.exit_code, result.stdout, result.stderr, message, cause)


def sandbox_context(
    result: ExecResult, workspace: Path | None, source: SourceKind | None = None
) -> sandbox_causes.SandboxContext:
    """What a sandbox-caused failure's message names, as the sandbox attested it."""
    attested = result.attestation
    return sandbox_causes.SandboxContext(
        image=str(attested.get("image") or ""),
        hook_user=str(attested.get("hook_user") or attested.get("user") or ""),
        workspace=str(workspace) if workspace is not None else "",
        network=str(attested.get("network") or ""),
        source=source,
    )


def hook_environment(
    plan: Plan,
    workspace: Path,
    session_env: Mapping[str, str],
    *,
    home: str | None = None,
    passed: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Spec section 5: exactly these variables, nothing from the worker's own environment
    but what the operator's allowlist passes (`passed`, see `hook_env`: below the rest, as
    a VM's environment is below what a session sets); plus HOME when the source has a hook
    home (as a VM's shell has one)."""
    payload = plan.payload
    env = {
        **(passed or {}),
        # the session's env from sessionStart next, so the fixed variables always win
        **session_env,
        "CURSOR_PROJECT_DIR": str(workspace),
        "CLAUDE_PROJECT_DIR": str(workspace),
        "CURSOR_VERSION": payload.cursor_version or "",
        "CURSOR_CODE_REMOTE": "true",
    }
    if payload.user_email:
        env["CURSOR_USER_EMAIL"] = payload.user_email
    if payload.transcript_path:
        env["CURSOR_TRANSCRIPT_PATH"] = payload.transcript_path
    if home is not None:
        env["HOME"] = home
    return env


@dataclass
class SandboxSet:
    """One sandbox per source kind, opened on first use, closed together."""

    opener: SandboxOpener
    _open: dict[SourceKind, Sandbox] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, kind: SourceKind, working_dir: Path) -> Sandbox:
        with self._lock:
            sandbox = self._open.get(kind)
            if sandbox is None:
                sandbox = self.opener(kind, working_dir)
                self._open[kind] = sandbox
            return sandbox

    def close(self) -> None:
        with self._lock:
            opened = list(self._open.values())
            self._open.clear()
        for sandbox in opened:
            sandbox.close()


@dataclass(frozen=True)
class RunOutcome:
    results: tuple[HookResult, ...]
    #: what the sandbox returned for each hook that ran, by hook id
    executions: Mapping[str, ExecResult]
    #: what the operator's allowlist passed to each source's hooks (`hook_env`)
    passed_env: Mapping[SourceKind, Passed] = field(default_factory=dict)


def run_plan(
    plan: Plan,
    sandboxes: SandboxSet,
    *,
    workspace: Path,
    session_env: Mapping[str, str],
    max_parallel: int,
    homes: Mapping[SourceKind, str] | None = None,
    hook_env: Callable[[PlannedHook], Mapping[str, str]] | None = None,
    shown: transcript.Transcript | None = None,
    passed_env: Mapping[SourceKind, Passed] | None = None,
) -> RunOutcome:
    """`homes`: each source's HOME (a source without one keeps the image's); `hook_env` adds
    variables for one hook run (the egress proxy's per-run credential); `shown`: the event's
    transcript as hooks may see it (a Claude `Stop` hook gets its last assistant message,
    read once, before any hook of the event runs)."""
    last_message = transcript.last_assistant_message(shown) if wants_last_message(plan) else None
    passed_env = passed_env or {}
    env = hook_environment(plan, workspace, session_env)
    envs = {
        kind: hook_environment(
            plan, workspace, session_env, home=(homes or {}).get(kind),
            passed=passed_env[kind].values if kind in passed_env else None,
        )
        for kind in {*(homes or {}), *passed_env}
    }  # fmt: skip
    executions: dict[str, ExecResult] = {}
    lock = threading.Lock()

    def run_one(hook: PlannedHook) -> Execution:
        with telemetry.hook(hook.source_kind.value, hook.hook_id, hook.command) as span:
            execution, result = run_in_sandbox(hook)
            telemetry.hook_ran(
                span,
                str(execution.status),
                execution.exit_code,
                str(execution.cause.kind) if execution.cause is not None else None,
                result.attestation if result is not None else {},
            )
            return execution

    def run_in_sandbox(hook: PlannedHook) -> tuple[Execution, ExecResult | None]:
        try:
            sandbox = sandboxes.get(hook.source_kind, hook.working_dir)
        except Exception as exc:  # a sandbox that cannot be opened fails this hook only
            message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            return Execution(ExecutionStatus.SANDBOX_ERROR, message=message), None
        request = ExecRequest(
            command=hook.command,
            cwd=str(hook.working_dir),
            stdin=claude_stdin(plan, hook, last_message),
            env=(
                {**envs.get(hook.source_kind, env), **hook_env(hook)}
                if hook_env is not None
                else envs.get(hook.source_kind, env)
            ),
            timeout_s=hook.timeout,
        )
        result = sandbox.run(request)
        with lock:
            executions[hook.hook_id] = result
        return to_execution(result, workspace, hook.source_kind), result

    def run_tier(hooks: Sequence[PlannedHook]) -> Sequence[Execution]:
        if len(hooks) == 1:
            return [run_one(hooks[0])]
        with ThreadPoolExecutor(max_workers=min(max_parallel, len(hooks))) as pool:
            return list(pool.map(telemetry.carry(run_one), hooks))

    results = run_tiers(plan, run_tier)
    return RunOutcome(results, executions, passed_env)
