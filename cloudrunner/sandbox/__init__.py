"""Running hook commands in hardened Docker containers (`hook` and `session` isolation).

from cloudrunner.sandbox import ExecRequest, SandboxLabels, SandboxSpec, open_sandbox

with open_sandbox(SandboxSpec(workspace, SandboxLabels(worker, session, "project"))) as sb:
    result = sb.run(ExecRequest("cat", str(workspace), stdin=b"{}", env={}, timeout_s=10))
"""

from cloudrunner.sandbox.base import (
    ExecRequest,
    ExecResult,
    Sandbox,
    SandboxConfigError,
    SandboxLabels,
    SandboxSpec,
)
from cloudrunner.sandbox.factory import open_sandbox
from cloudrunner.sandbox.hook_container import HookContainerSandbox
from cloudrunner.sandbox.limits import SandboxLimits, SandboxProfile
from cloudrunner.sandbox.session_pool import SessionPool
from cloudrunner.sandbox.session_sandbox import SessionSandbox

__all__ = [
    "ExecRequest",
    "ExecResult",
    "HookContainerSandbox",
    "Sandbox",
    "SandboxConfigError",
    "SandboxLabels",
    "SandboxLimits",
    "SandboxProfile",
    "SandboxSpec",
    "SessionPool",
    "SessionSandbox",
    "open_sandbox",
]
